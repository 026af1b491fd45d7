"""The help screen (F1 or ?): what each key does, on every pane, read from the bindings."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown

_INTRO = """\
# tuneledger

An append-only ledger of a tuning session. Nothing here edits or deletes: every
action **appends an event** (triage, note, proposal, decision), and every pane
is derived from the log. Changes written by other processes (the CLI, a runner,
an agent) appear within a second, with no key pressed.

**Panes:** Board (triage), Benchmarks (vs baseline, with a plot), Timeline (live
tail; Enter on a link opens that event), Flags (verdict matrix), SQL (read-only).
Ctrl+P opens the command palette: every action is there too.
"""

_PANE_KEYS = """
## Keys inside a pane

| key | where | what |
|---|---|---|
| ↑ ↓ | tables | move the cursor |
| Tab / Shift+Tab | everywhere | move between filters, table and detail |
| m | Benchmarks | cycle the plotted metric |
| Enter | SQL | run the query |
| Escape | SQL input | leave the query line (then 1-5 and q work again; F2-F6 always switch panes) |
| ↑ ↓ | SQL input | query history |
| Enter | Timeline links | open the linked event |
| Escape | forms | cancel |
"""


class HelpScreen(ModalScreen[None]):
    """Keys and what they do; Escape, q, F1 or ? closes it."""

    BINDINGS = [
        Binding("escape,q,f1,question_mark", "close", "Close help", id="help.close"),
    ]

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 96; height: 90%; border: thick $primary; background: $surface; padding: 0 1; }
    """

    def __init__(self, bindings: list[Binding]) -> None:
        super().__init__()
        self.app_bindings = bindings

    def compose(self) -> ComposeResult:
        rows = ["| key | action | binding id |", "|---|---|---|"]
        for binding in self.app_bindings:
            if binding.description:
                keys = ", ".join(_key_label(k) for k in binding.key.split(","))
                rows.append(f"| {keys} | {binding.description} | `{binding.id or ''}` |")
        text = _INTRO + "\n## Keys\n\n" + "\n".join(rows) + "\n" + _PANE_KEYS
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
