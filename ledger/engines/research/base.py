"""What every part of the evaluator shares: its state, and the operations one part asks of a
part built on it (an expression evaluates a call, a call runs statements)."""

from __future__ import annotations

import ast
from typing import Any

from .access import AccessModel
from .model import Site
from .records import ArgsView, Change, Cond, FlagState, Frame, Refusal
from .target import Target
from .values import ClassRef, EnumMember, Fact
from .world import World


class InterpreterBase:
    world: World
    access: AccessModel
    target: Target
    state: FlagState
    args: ArgsView
    self_class: str
    self_module: str
    _self_ref: ClassRef | None | bool
    changes: list[Change]
    defaults: dict[str, Any]
    refusals: list[Refusal]
    logged: list[tuple[str, Site]]
    path: list[Cond]
    _facts: list[set[Fact]]
    _globals: dict[tuple[str, str], tuple[Any, frozenset[Fact]]]
    _resolving: set[tuple[str, str]]
    _stack: list[ast.AST]
    _memo: dict[tuple[Any, ...], tuple[Any, frozenset[Fact]]]
    _blocks: list[tuple[str, list[ast.stmt]]]
    _steps: int
    _max_steps: int
    exhausted: bool
    _argument_facts: frozenset[Fact]
    _src: dict[int, tuple[ast.AST, str]]
    _config_classes: dict[str, list[tuple[str, str]]] | None

    # Defined by the parts built on this one (objects, calls, statements).
    def attribute(self, base: Any, name: str) -> Any:
        raise NotImplementedError

    def flag_value(self, name: str) -> Any:
        raise NotImplementedError

    def global_value(self, module: str, name: str) -> Any:
        raise NotImplementedError

    def enum_member(self, cls: ClassRef, name: str) -> Any:
        raise NotImplementedError

    def _enum_class(self, member: EnumMember) -> ClassRef | None:
        raise NotImplementedError

    def _mro(self, cls: ClassRef, depth: int = 0) -> list[ClassRef]:
        raise NotImplementedError

    def config_attr(self, base: Any, name: str) -> Any:
        raise NotImplementedError

    def assign_flag(
        self, name: str, value: Any, node: ast.AST, value_facts: frozenset[Fact]
    ) -> None:
        raise NotImplementedError

    def call(
        self,
        function: Any,
        args: list[Any],
        keywords: dict[str, Any],
        node: ast.AST,
        frame: Frame | None,
    ) -> Any:
        raise NotImplementedError

    def exec_block(self, body: list[ast.stmt], frame: Frame, returned: list[Any]) -> Cond | None:
        raise NotImplementedError
