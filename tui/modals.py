"""Modal forms: a one-line prompt (reject reason, note), the propose form, the decision form.

Each returns its values to the caller through ``dismiss`` (``None`` when
cancelled with Escape); the app turns them into one appended event.
"""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select, Static

from schemas.vocab import CandidateKind, Priority

_KINDS = list(CandidateKind.__args__)  # type: ignore[attr-defined]
_PRIORITIES = list(Priority.__args__)  # type: ignore[attr-defined]

_FORM_CSS = """
{name} {{ align: center middle; }}
{name} > Vertical {{
    width: 90; max-width: 100%; height: auto; max-height: 100%; padding: 0 2;
    border: thick $primary; background: $surface;
}}
{name} .form-title {{ text-style: bold; margin-bottom: 1; }}
{name} .form-fields {{ height: auto; max-height: 50vh; }}
{name} Label {{ margin-top: 1; color: $text-muted; }}
{name} .form-error {{ color: $error; height: auto; }}
{name} .form-buttons {{ height: 3; margin-top: 1; align-horizontal: right; }}
{name} Button {{ margin-left: 2; }}
{name} Input > .input--placeholder {{ color: $text-disabled; text-style: italic; }}
{name} .form-derived {{ color: $text-muted; height: auto; }}
"""


def _hint(text: str) -> str:
    """A placeholder that reads as an example, not as a value already typed."""
    return f"e.g. {text}" if text else ""


class _Form(ModalScreen[Any]):
    """Base of the forms: Escape cancels, Enter in the last field (or OK) submits.

    The first text field has the focus when a form opens (a Select or the scrolling container
    took it, and the first keystrokes were lost); placeholders are hints (``e.g. …``, dim and
    italic), never values that look typed.
    """

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="form.cancel")]
    AUTO_FOCUS = "Input"

    def action_cancel(self) -> None:
        """Close without a result."""
        self.dismiss(None)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        """OK submits, Cancel cancels."""
        event.stop()
        if event.button.id == "ok":
            self.submit()
        else:
            self.dismiss(None)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Enter moves to the next field; in the last one it submits."""
        event.stop()
        inputs = list(self.query(Input))
        if event.input is inputs[-1]:
            self.submit()
        else:
            self.focus_next()

    def _buttons(self) -> ComposeResult:
        with Horizontal(classes="form-buttons"):
            yield Button("OK", id="ok", variant="primary")
            yield Button("Cancel", id="cancel")

    def fail(self, message: str, field: str | None = None) -> None:
        """Show a validation error in the form, which stays open with what was typed; ``field``
        (a widget id) gets the focus, scrolled into view."""
        self.query_one(".form-error", Static).update(message)
        if field is not None and self.query(f"#{field}"):
            self.query_one(f"#{field}").focus()

    def fail_on(self, exc: ValueError, labels: dict[str, str]) -> None:
        """Show a pydantic validation error naming the form's field (``labels``: model field -> widget id)."""
        errors = getattr(exc, "errors", None)
        first = errors()[0] if callable(errors) else {"loc": (), "msg": str(exc)}
        name = str(first.get("loc", ("",))[0]) if first.get("loc") else ""
        widget = labels.get(name)
        where = (widget or name).replace("_", " ")
        self.fail(
            f"{where}: {first.get('msg', 'invalid')}" if where else str(first.get("msg")), widget
        )

    def submit(self) -> None:  # pragma: no cover - overridden
        """Validate and dismiss with the values."""
        raise NotImplementedError


class TextPrompt(_Form):
    """Ask for one line of text (a reject reason, a note); ``required`` refuses empty text."""

    DEFAULT_CSS = _FORM_CSS.format(name="TextPrompt")

    def __init__(
        self, title: str, placeholder: str = "", *, required: bool = True, value: str = ""
    ) -> None:
        super().__init__()
        self.title_text = title
        self.placeholder = placeholder
        self.required = required
        self.value = value

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self.title_text, classes="form-title")
            yield Input(value=self.value, placeholder=_hint(self.placeholder), id="prompt-input")
            yield Static("", classes="form-error")
            yield from self._buttons()

    def submit(self) -> None:
        """Dismiss with the text (stripped)."""
        text = self.query_one("#prompt-input", Input).value.strip()
        if self.required and not text:
            self.fail("Please write something (Escape cancels).")
            return
        self.dismiss(text)


class ProposeForm(_Form):
    """Propose a new candidate: kind, title, flag, priority, hypothesis, optional id."""

    DEFAULT_CSS = _FORM_CSS.format(name="ProposeForm")

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Propose a candidate", classes="form-title")
            with VerticalScroll(classes="form-fields"):
                yield from self._fields()
            yield Static("", classes="form-error")
            yield from self._buttons()

    def _fields(self) -> ComposeResult:
        yield Label("kind")
        yield Select([(k, k) for k in _KINDS], value="flag", allow_blank=False, id="kind")
        yield Label("title (what to try)")
        yield Input(placeholder=_hint("Try --enable-foo"), id="title")
        yield Label("flag (for a flag candidate; without dashes is fine)")
        yield Input(placeholder=_hint("enable-foo"), id="flag")
        yield Label("priority")
        yield Select([(p, p) for p in _PRIORITIES], prompt="(none)", id="priority")
        yield Label("hypothesis")
        yield Input(placeholder=_hint("why it might help"), id="hypothesis")
        yield Label("candidate id (empty: derived from kind and flag, else the title)")
        yield Input(placeholder=_hint("flag:enable-foo"), id="candidate_id")
        yield Static(self._derived_text(), id="derived-id", classes="form-derived")

    def _derived_text(self) -> str:
        """What the proposal will be recorded as, from the fields as they are now."""
        from .writes import derived_candidate_id

        if not self.is_mounted or not self.query("#candidate_id"):
            return "id: flag:unnamed (derived)"
        typed = self.query_one("#candidate_id", Input).value.strip()
        if typed:
            return f"id: {typed}"
        kind = self.query_one("#kind", Select).value
        derived = derived_candidate_id(
            kind if isinstance(kind, str) else "flag",
            self.query_one("#flag", Input).value.strip(),
            self.query_one("#title", Input).value.strip(),
        )
        return f"id: {derived} (derived)"

    def on_input_changed(self, event: Input.Changed) -> None:
        """Show the id the proposal will get as the fields are typed."""
        self.query_one("#derived-id", Static).update(self._derived_text())

    def on_select_changed(self, event: Select.Changed) -> None:
        if event.select.id == "kind":
            self.query_one("#derived-id", Static).update(self._derived_text())

    def submit(self) -> None:
        """Dismiss with the form's fields (a title is required)."""
        values: dict[str, Any] = {
            name: self.query_one(f"#{name}", Input).value.strip()
            for name in ("title", "flag", "hypothesis", "candidate_id")
        }
        values["kind"] = self.query_one("#kind", Select).value
        priority = self.query_one("#priority", Select).value
        values["priority"] = priority if isinstance(priority, str) else None
        if not values["title"]:
            self.fail("title: required (what to try).", "title")
            return
        from .writes import check_proposal

        try:
            check_proposal(values)
        except ValueError as exc:
            self.fail_on(
                exc,
                {k: k for k in ("title", "flag", "hypothesis", "candidate_id", "kind", "priority")},
            )
            return
        self.dismiss(values)


class DecisionForm(_Form):
    """Record a decision: what, why, alternatives weighed, the candidate, evidence event ids."""

    DEFAULT_CSS = _FORM_CSS.format(name="DecisionForm")

    def __init__(
        self,
        candidate_id: str | None = None,
        evidence: str = "",
        timeline: list[dict[str, Any]] | None = None,
    ) -> None:
        super().__init__()
        self.candidate_id = candidate_id or ""
        self.evidence = evidence
        #: Recent timeline rows (seq, type, summary, event_id) offered as evidence to pick.
        self.timeline = timeline or []

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Record a decision", classes="form-title")
            with VerticalScroll(classes="form-fields"):
                yield from self._fields()
            yield Static("", classes="form-error")
            yield from self._buttons()

    def _fields(self) -> ComposeResult:
        yield Label("decision")
        yield Input(placeholder=_hint("Keep --enable-foo; benchmark at c=1..64"), id="decision")
        yield Label("rationale")
        yield Input(placeholder=_hint("why: what the measurements say"), id="rationale")
        yield Label("alternatives (separated by ;)")
        yield Input(placeholder=_hint("revert; tune the kernel instead"), id="alternatives")
        yield Label("candidate id")
        yield Input(value=self.candidate_id, id="candidate_id")
        yield Label("evidence: pick events from the timeline (each adds its id below)")
        yield Select(
            [(self._option(row), str(row["event_id"])) for row in self.timeline[:200]],
            prompt="(pick an event)",
            id="evidence-pick",
        )
        yield Label("evidence event ids (separated by ;)")
        yield Input(value=self.evidence, id="evidence_event_ids")

    @staticmethod
    def _option(row: dict[str, Any]) -> str:
        text = f"seq {row['seq']} {row['type']}: {row.get('summary') or ''}"
        return text if len(text) <= 80 else text[:79] + "…"

    def on_select_changed(self, event: Select.Changed) -> None:
        """A timeline event picked as evidence: add its id to the evidence field."""
        if event.select.id != "evidence-pick" or not isinstance(event.value, str):
            return
        event.stop()
        field = self.query_one("#evidence_event_ids", Input)
        ids = [part.strip() for part in field.value.split(";") if part.strip()]
        if event.value not in ids:
            field.value = "; ".join([*ids, event.value])

    def submit(self) -> None:
        """Dismiss with the form's fields (a decision is required)."""
        values = {
            name: self.query_one(f"#{name}", Input).value.strip()
            for name in (
                "decision",
                "rationale",
                "alternatives",
                "candidate_id",
                "evidence_event_ids",
            )
        }
        if not values["decision"]:
            self.fail("decision: required (say what was decided).", "decision")
            return
        from .writes import check_decision

        try:
            check_decision(values)
        except ValueError as exc:
            self.fail_on(
                exc,
                {
                    k: k
                    for k in (
                        "decision",
                        "rationale",
                        "alternatives",
                        "candidate_id",
                        "evidence_event_ids",
                    )
                },
            )
            return
        self.dismiss(values)
