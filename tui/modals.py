"""Modal forms: a one-line prompt (reject reason, note), the propose form, the decision form.

Each returns its values to the caller through ``dismiss`` (``None`` when
cancelled with Escape); the app turns them into one appended event.
"""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select, Static

from schemas.vocab import CandidateKind, Priority

_KINDS = list(CandidateKind.__args__)  # type: ignore[attr-defined]
_PRIORITIES = list(Priority.__args__)  # type: ignore[attr-defined]

_FORM_CSS = """
{name} {{ align: center middle; }}
{name} > Vertical {{
    width: 90; height: auto; max-height: 90%; padding: 1 2;
    border: thick $primary; background: $surface;
}}
{name} .form-title {{ text-style: bold; margin-bottom: 1; }}
{name} Label {{ margin-top: 1; color: $text-muted; }}
{name} .form-error {{ color: $error; height: auto; }}
{name} .form-buttons {{ height: 3; margin-top: 1; align-horizontal: right; }}
{name} Button {{ margin-left: 2; }}
"""


class _Form(ModalScreen[Any]):
    """Base of the forms: Escape cancels, Enter in the last field (or OK) submits."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="form.cancel")]

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

    def fail(self, message: str) -> None:
        """Show a validation error in the form (the form stays open)."""
        self.query_one(".form-error", Static).update(message)

    def submit(self) -> None:  # pragma: no cover - overridden
        """Validate and dismiss with the values."""
        raise NotImplementedError


class TextPrompt(_Form):
    """Ask for one line of text (a reject reason, a note); ``required`` refuses empty text."""

    DEFAULT_CSS = _FORM_CSS.format(name="TextPrompt")

    def __init__(self, title: str, placeholder: str = "", *, required: bool = True, value: str = "") -> None:
        super().__init__()
        self.title_text = title
        self.placeholder = placeholder
        self.required = required
        self.value = value

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self.title_text, classes="form-title")
            yield Input(value=self.value, placeholder=self.placeholder, id="prompt-input")
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
            yield Label("kind")
            yield Select([(k, k) for k in _KINDS], value="flag", allow_blank=False, id="kind")
            yield Label("title (what to try)")
            yield Input(placeholder="Try --enable-foo", id="title")
            yield Label("flag (for a flag candidate; without dashes is fine)")
            yield Input(placeholder="enable-foo", id="flag")
            yield Label("priority")
            yield Select([(p, p) for p in _PRIORITIES], prompt="(none)", id="priority")
            yield Label("hypothesis")
            yield Input(placeholder="why it might help", id="hypothesis")
            yield Label("candidate id (default: kind:flag or kind:title-slug)")
            yield Input(placeholder="flag:enable-foo", id="candidate_id")
            yield Static("", classes="form-error")
            yield from self._buttons()

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
            self.fail("A title is required.")
            return
        self.dismiss(values)


class DecisionForm(_Form):
    """Record a decision: what, why, alternatives weighed, the candidate, evidence event ids."""

    DEFAULT_CSS = _FORM_CSS.format(name="DecisionForm")

    def __init__(self, candidate_id: str | None = None, evidence: str = "") -> None:
        super().__init__()
        self.candidate_id = candidate_id or ""
        self.evidence = evidence

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Record a decision", classes="form-title")
            yield Label("decision")
            yield Input(placeholder="Keep --enable-foo; benchmark at c=1..64", id="decision")
            yield Label("rationale")
            yield Input(placeholder="why", id="rationale")
            yield Label("alternatives (separated by ;)")
            yield Input(placeholder="revert; tune the kernel instead", id="alternatives")
            yield Label("candidate id")
            yield Input(value=self.candidate_id, id="candidate_id")
            yield Label("evidence event ids (separated by ;)")
            yield Input(value=self.evidence, id="evidence_event_ids")
            yield Static("", classes="form-error")
            yield from self._buttons()

    def submit(self) -> None:
        """Dismiss with the form's fields (a decision is required)."""
        values = {
            name: self.query_one(f"#{name}", Input).value.strip()
            for name in ("decision", "rationale", "alternatives", "candidate_id", "evidence_event_ids")
        }
        if not values["decision"]:
            self.fail("Say what was decided.")
            return
        self.dismiss(values)
