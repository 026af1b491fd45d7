"""The help screen (F1 or ?): what each key does, on every pane, read from the bindings and
the panes (``tui.panes.PANES``: each pane's summary and keys of its own)."""

from __future__ import annotations

from collections.abc import Sequence

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown

from .pane import Pane

_INTRO = """\
# tuneledger

An append-only ledger of a tuning session. Nothing here edits or deletes: every
action **appends an event** (triage, note, proposal, decision), and every pane
is derived from the log. Changes written by other processes (the CLI, a runner,
an agent) appear within a second, with no key pressed.

"""

#: Keys that work in every pane: (key, where, what); the panes' own come between these.
_COMMON_KEYS = (
    ("↑ ↓", "tables", "move the cursor"),
    ("Tab / Shift+Tab", "everywhere", "move between filters, table and detail"),
)
_FORM_KEYS = (("Escape", "forms", "cancel"),)


class HelpScreen(ModalScreen[None]):
    """Keys and what they do; Escape, q, F1 or ? closes it."""

    BINDINGS = [
        Binding("escape,q,f1,question_mark", "close", "Close help", id="help.close"),
    ]

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 96; height: 90%; border: thick $primary; background: $surface; padding: 0 1; }
    """

    def __init__(self, bindings: list[Binding], panes: Sequence[type[Pane]] = ()) -> None:
        super().__init__()
        self.app_bindings = bindings
        self.panes = panes

    def compose(self) -> ComposeResult:
        rows = ["| key | action | binding id |", "|---|---|---|"]
        for binding in self.app_bindings:
            if binding.description:
                keys = ", ".join(_key_label(k) for k in binding.key.split(","))
                rows.append(f"| {keys} | {binding.description} | `{binding.id or ''}` |")
        panes = ", ".join(f"{p.TITLE} ({p.SUMMARY})" for p in self.panes)
        intro = (
            _INTRO
            + f"**Panes:** {panes}.\nCtrl+P opens the command palette: every action is there too.\n"
        )
        own = [k for p in self.panes for k in p.HELP_KEYS]
        pane_keys = "\n## Keys inside a pane\n\n| key | where | what |\n|---|---|---|\n"
        pane_keys += "".join(
            f"| {key} | {where} | {what} |\n"
            for key, where, what in (*_COMMON_KEYS, *own, *_FORM_KEYS)
        )
        text = intro + "\n## Keys\n\n" + "\n".join(rows) + "\n" + pane_keys
        text += "\nKeymaps: bind keys to the binding ids above (Textual's `App.set_keymap`).\n"
        with VerticalScroll():
            yield Markdown(text)

    def action_close(self) -> None:
        """Close the help screen."""
        self.dismiss(None)


def _key_label(key: str) -> str:
    return {"question_mark": "?", "ctrl+r": "Ctrl+R"}.get(
        key, key.upper() if key.startswith("f") and key[1:].isdigit() else key
    )
