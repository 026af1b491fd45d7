"""The command palette (Ctrl+P): one entry per app action, found from the app's bindings.

Deriving the entries from the bindings keeps the palette, the footer, the
help screen and user keymaps (by binding id) in step: an action with a key
is always in the palette too.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from textual.command import DiscoveryHit, Hit, Hits, Provider

if TYPE_CHECKING:
    from textual.binding import Binding

#: Actions with no key of their own: (palette name, help, action string).
EXTRA_COMMANDS: tuple[tuple[str, str, str], ...] = (
    (
        "Timeline: show all event types and sessions",
        "Clear the timeline's filters",
        "clear_timeline_filter",
    ),
    ("Board: clear filters", "Show every candidate of the session", "clear_board_filter"),
)


class LedgerCommands(Provider):
    """Every tuneledger action: triage, notes, proposals, decisions, export, panes, refresh."""

    def _commands(self) -> list[tuple[str, str, str]]:
        bindings: list[Binding] = list(getattr(self.app, "PALETTE_BINDINGS", []))
        out = []
        for binding in bindings:
            if binding.description:
                help_text = binding.tooltip or f"key: {binding.key.split(',')[0]}"
                out.append((f"{binding.description}", help_text, binding.action))
        out.extend(EXTRA_COMMANDS)
        return out

    async def discover(self) -> Hits:
        """All commands, when the palette opens with an empty query."""
        for name, help_text, action in self._commands():
            yield DiscoveryHit(name, partial(self.app.run_action, action), help=help_text)

    async def search(self, query: str) -> Hits:
        """Commands whose name matches the query, best first."""
        matcher = self.matcher(query)
        for name, help_text, action in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(
                    score,
                    matcher.highlight(name),
                    partial(self.app.run_action, action),
                    help=help_text,
                )
