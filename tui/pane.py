"""The pane protocol: one pane is one class in one module, listed once in ``tui.panes.PANES``.

A pane says what it is and the app builds the rest from that list: the tabs and their keys
(bindings with ids, so keymaps, the footer, the help and the command palette see them), which
widget takes the focus, what a refresh reads for it, what the help says about it and which
app actions are offered only while it is shown.

- ``NAME``: the tab's id, the pane's part name and the prefix of its ids (``board``);
- ``TITLE`` and ``KEYS``: the tab's title and the keys that show it (``"1,f2"``);
- ``FOCUS``: the selector of the widget focused when the pane is shown;
- ``PART``: what a refresh reads for it (``tui.parts.Part``: the event types that make it
  stale and a ``read(Reading)`` run in a worker, UI-free), or None when it reads on demand;
- ``read_state()``: what that read needs from the screen (the timeline's filter), taken on
  the UI thread; ``show(data)``: show what ``PART.read`` returned, on the UI thread;
- ``SUMMARY`` and ``HELP_KEYS``: its line in the help and its own keys ((key, where, what));
- ``ACTIONS``: app actions shown (and run) only while this pane is the one shown;
- ``COMMANDS``: palette entries (name, help, action) run on the pane itself
  (``action_<name>`` methods of the pane).

A pane runs the workers of its own (the timeline's filter reload and event detail, the SQL
console's query) with ``@work(thread=True)``: their messages come back to the pane, and are
dropped with it when the app closes.
"""

from __future__ import annotations

from typing import Any, ClassVar

from textual.containers import Vertical

from .parts import Part


class Pane(Vertical):
    """A pane of the app (see the module docstring for what each attribute means)."""

    NAME: ClassVar[str] = ""
    TITLE: ClassVar[str] = ""
    KEYS: ClassVar[str] = ""
    FOCUS: ClassVar[str] = ""
    PART: ClassVar[Part | None] = None
    SUMMARY: ClassVar[str] = ""
    HELP_KEYS: ClassVar[tuple[tuple[str, str, str], ...]] = ()
    ACTIONS: ClassVar[frozenset[str]] = frozenset()
    COMMANDS: ClassVar[tuple[tuple[str, str, str], ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        missing = [a for a in ("NAME", "TITLE", "KEYS", "FOCUS") if not getattr(cls, a)]
        if missing:
            raise TypeError(f"pane {cls.__name__}: no {', '.join(missing)}")
        if cls.PART is not None and cls.PART.name != cls.NAME:
            raise TypeError(
                f"pane {cls.__name__}: its part is named {cls.PART.name!r}, not {cls.NAME!r}"
            )

    def read_state(self) -> Any:
        """What this pane's read needs from the screen (None: nothing)."""
        return None

    def show(self, data: Any) -> None:
        """Show what ``PART.read`` returned."""
        raise NotImplementedError

    @property
    def closing(self) -> bool:
        """True once the app shuts down: a worker's late result is dropped, not shown."""
        return bool(getattr(self.app, "closing", False)) or not self.is_attached
