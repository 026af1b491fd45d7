"""The command palette (Ctrl+P): one entry per app action, found from the app's bindings.

Deriving the entries from the bindings keeps the palette, the footer, the
help screen and user keymaps (by binding id) in step: an action with a key
is always in the palette too. The panes' own commands (``Pane.COMMANDS``, e.g. clearing a
pane's filters) run on the pane.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from textual.command import DiscoveryHit, Hit, Hits, Provider

from .panes import PANES

if TYPE_CHECKING:
    from collections.abc import Callable

    from textual.binding import Binding


class LedgerCommands(Provider):
    """Every tuneledger action: triage, notes, proposals, decisions, export, panes, refresh."""

    def _commands(self) -> list[tuple[str, str, Callable[[], object]]]:
        bindings: list[Binding] = list(getattr(self.app, "PALETTE_BINDINGS", []))
        out: list[tuple[str, str, Callable[[], object]]] = []
        for binding in bindings:
            if binding.description:
                help_text = binding.tooltip or f"key: {binding.key.split(',')[0]}"
                out.append(
                    (binding.description, help_text, partial(self.app.run_action, binding.action))
                )
        for pane in PANES:
            for name, help_text, action in pane.COMMANDS:
                out.append((name, help_text, partial(self._run_on_pane, pane.NAME, action)))
        return out

    async def _run_on_pane(self, pane: str, action: str) -> None:
        await self.app.run_action(action, self.app.pane(pane))  # type: ignore[attr-defined]

    async def discover(self) -> Hits:
        """All commands, when the palette opens with an empty query."""
        for name, help_text, run in self._commands():
            yield DiscoveryHit(name, run, help=help_text)

    async def search(self, query: str) -> Hits:
        """Commands whose name matches the query, best first."""
        matcher = self.matcher(query)
        for name, help_text, run in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), run, help=help_text)
