"""A small abstract interpreter of the engine's Python: enough to follow its argument resolution
(``ServerArgs.__post_init__`` and its ``_handle_*`` steps, or the newer resolution pipeline)
and to decide the conditions around a flag's reads, for one arch, model and set of flags.

Values are Python constants where they follow from what was given, ``Unknown`` where they do
not. A condition is true, false or unknown; an ``if`` whose test is unknown runs both branches
and joins what they assigned. Every assignment to a flag met on the way is recorded with the
conditions it ran under and the warning logged beside it (the engine's overrides); every
``raise`` met is recorded with its message (the engine refusing a combination).

Nothing here imports or runs the engine: its functions are walked, not called.
"""

from __future__ import annotations

import ast
from typing import Any

from .access import AccessModel
from .model import Site
from .records import (  # noqa: F401  (the names the rest of the package imports from here)
    _MISSING,
    ArgsView,
    Budget,
    Change,
    Cond,
    FlagState,
    Frame,
    KindView,
    Refusal,
    _bases,
)
from .statements import Statements
from .target import Target
from .values import ClassRef, Fact
from .world import World


class Interpreter(Statements):
    def __init__(
        self,
        world: World,
        access: AccessModel,
        target: Target,
        state: FlagState,
        self_class: str = "ServerArgs",
        self_module: str = "",
        max_steps: int = 400_000,
        config_classes: dict[str, list[tuple[str, str]]] | None = None,
        class_modules: dict[str, list[str]] | None = None,
    ) -> None:
        self.world = world
        self.access = access
        self.target = target
        self.state = state
        self.args = ArgsView(state)
        self.self_class = self_class
        self.self_module = self_module
        self._self_ref: ClassRef | None | bool = False
        self.changes: list[Change] = []
        self.defaults: dict[str, Any] = {}  # each flag's value before resolution, when not given
        self.refusals: list[Refusal] = []
        self.logged: list[tuple[str, Site]] = []
        self.path: list[Cond] = []
        self._facts: list[set[Fact]] = [set()]
        self._globals: dict[tuple[str, str], tuple[Any, frozenset[Fact]]] = {}
        self._resolving: set[tuple[str, str]] = set()
        self._stack: list[ast.AST] = []
        self._memo: dict[tuple[Any, ...], tuple[Any, frozenset[Fact]]] = {}
        self._blocks: list[tuple[str, list[ast.stmt]]] = []
        self._steps = 0
        self._max_steps = max_steps
        self.exhausted = False
        self._argument_facts: frozenset[Fact] = frozenset()
        self._src: dict[int, tuple[ast.AST, str]] = {}
        #: flag objects the engine does not build on this target: kind -> the deciding facts
        self.absent_kinds: dict[str, frozenset[Fact]] = {}
        #: model_type -> the package's config classes declaring it (the index's
        #: ``model_types``); None: not known
        self._config_classes = config_classes
        #: class name -> the modules defining a class of that name (the index's)
        self.class_modules = class_modules or {}

    def forget(self) -> None:
        """Drop the values worked out so far (calls' results): the world they assumed changed."""
        self._memo.clear()
