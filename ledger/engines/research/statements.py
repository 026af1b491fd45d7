"""Statements: an ``if`` whose test is unknown runs both ways and joins them; loops, ``try``, ``with``; every assignment to a flag is recorded with its conditions and warning, every ``raise`` reached as a refusal."""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

from .calls import Calls
from .definitions import help_text
from .model import Site
from .pysource import squeeze
from .records import (
    _BINOPS,
    _LOG,
    _MAX_LOOP,
    ArgsView,
    Change,
    Cond,
    Frame,
    KindView,
    Refusal,
    _as_load,
    _assigned_names,
    _bases,
    _Break,
    _Continue,
    _known,
    _Raise,
    _Return,
    join,
)
from .values import (
    ClassRef,
    EnumMember,
    Fact,
    FunctionRef,
    Instance,
    Unknown,
    truth,
)
from .world import absolute_module

#: ``d.items()``, ``d.keys()``, ``d.values()`` of a dict the walk knows
_DICT_VIEWS: tuple[type[Any], ...] = (type({}.items()), type({}.keys()), type({}.values()))


class Statements(Calls):
    def exec_block(self, body: list[ast.stmt], frame: Frame, returned: list[Any]) -> Cond | None:
        """Run statements in order. Returns a condition when the block may have ended the
        function part-way (an ``if`` with an unknown test that returns): what comes after the
        block runs only under it, and the caller keeps it on the path."""
        self._blocks.append((frame.module, body))
        pushed: list[Cond] = []
        try:
            for stmt in body:
                guard = self.exec_stmt(stmt, frame, returned)
                if guard is not None:
                    self.path.append(guard)
                    pushed.append(guard)
        finally:
            for _ in pushed:
                self.path.pop()
            self._blocks.pop()
        return pushed[0] if pushed else None

    def exec_stmt(self, stmt: ast.stmt, frame: Frame, returned: list[Any]) -> Cond | None:
        self.tick()
        if isinstance(stmt, ast.If):
            return self.exec_if(stmt, frame, returned)
        if isinstance(stmt, ast.Return):
            raise _Return(self.eval(stmt.value, frame) if stmt.value is not None else None)
        if isinstance(stmt, ast.Raise):
            self.refuse(stmt, frame)
            raise _Raise()
        if isinstance(stmt, ast.Assert):
            self.exec_assert(stmt, frame)
        elif isinstance(stmt, ast.Assign):
            value, facts = self.with_facts(lambda: self.eval(stmt.value, frame))
            self._merge_facts(facts)
            for target in stmt.targets:
                self.store(target, value, frame, stmt, facts)
        elif isinstance(stmt, ast.AnnAssign):
            if stmt.value is not None:
                self.store(stmt.target, self.eval(stmt.value, frame), frame, stmt)
        elif isinstance(stmt, ast.AugAssign):
            self.exec_augassign(stmt, frame)
        elif isinstance(stmt, ast.Expr):
            self.eval(stmt.value, frame)
        elif isinstance(stmt, ast.Import | ast.ImportFrom):
            self.exec_import(stmt, frame)
        elif isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            closure = frame.locals if frame.function != "<module>" else None
            frame.locals[stmt.name] = FunctionRef(
                frame.module, f"{frame.function}.{stmt.name}", stmt, closure=closure
            )
        elif isinstance(stmt, ast.ClassDef):
            frame.locals[stmt.name] = ClassRef(frame.module, stmt.name, stmt, _bases(stmt))
        elif isinstance(stmt, ast.For | ast.AsyncFor):
            return self.exec_for(stmt, frame, returned)
        elif isinstance(stmt, ast.While):
            if truth(self.eval(stmt.test, frame)) is not False:
                return self.maybe(
                    lambda: self.exec_block(stmt.body, frame, returned),
                    frame,
                    self.src(stmt.test),
                    returned,
                )
        elif isinstance(stmt, ast.Try | ast.TryStar):
            return self.exec_try(stmt, frame, returned)
        elif isinstance(stmt, ast.With | ast.AsyncWith):
            for item in stmt.items:
                value = self.eval(item.context_expr, frame)
                if item.optional_vars is not None:
                    self.store(
                        item.optional_vars,
                        Unknown(item.context_expr) if not isinstance(value, ArgsView) else value,
                        frame,
                        stmt,
                    )
            return self.exec_block(stmt.body, frame, returned)
        elif isinstance(stmt, ast.Break):
            raise _Break()
        elif isinstance(stmt, ast.Continue):
            raise _Continue()
        elif isinstance(stmt, ast.Match):
            self.eval(stmt.subject, frame)
            guards = [self._case(case, frame, returned) for case in stmt.cases]
            return next((g for g in guards if g is not None), None)
        return None

    def _case(self, case: ast.match_case, frame: Frame, returned: list[Any]) -> Cond | None:
        return self.maybe(
            lambda: self.exec_block(case.body, frame, returned), frame, "a match case", returned
        )

    def exec_augassign(self, stmt: ast.AugAssign, frame: Frame) -> None:
        current = self.eval(_as_load(stmt.target), frame)
        right = self.eval(stmt.value, frame)
        result: Any = Unknown(stmt)
        if _known(current) and _known(right) and type(stmt.op) in _BINOPS:
            try:
                result = _BINOPS[type(stmt.op)](current, right)
            except Exception:
                result = Unknown(stmt)
        self.store(stmt.target, result, frame, stmt)

    def exec_if(self, stmt: ast.If, frame: Frame, returned: list[Any]) -> Cond | None:
        test, facts = self.with_facts(lambda: self.eval(stmt.test, frame))
        self._merge_facts(facts)
        text = self.src(stmt.test)
        site = Site(self.world.path(frame.module), stmt.lineno)
        t = truth(test)
        if t is not None:
            branch = stmt.body if t else stmt.orelse
            label = text if t else f"not ({text})"
            self.path.append(Cond(label, site, True, facts))
            try:
                return self.exec_block(branch, frame, returned)
            finally:
                self.path.pop()
        why = test.why if isinstance(test, Unknown) else text
        first = len(returned)
        before = self._snapshot(frame)
        self.narrow(stmt.test, frame, True)
        body_end = self._branch(stmt.body, frame, returned, Cond(text, site, None, facts))
        after_body = self._snapshot(frame)
        self._restore(frame, before)
        self.narrow(stmt.test, frame, False)
        else_end = self._branch(
            stmt.orelse, frame, returned, Cond(f"not ({text})", site, None, facts)
        )
        after_else = self._snapshot(frame)
        if body_end is True and else_end is True:
            self._restore(frame, self._join(after_body, after_else, why))
            # the function returns one of what the two sides returned (``"fa3"`` or ...): a
            # test of it against a value neither returns is decided
            ends = returned[first:]
            del returned[first:]
            value: Any = ends[0] if ends else Unknown(why)
            for other in ends[1:]:
                value = join(value, other, why)
            raise _Return(value)
        if body_end is True:
            self._restore(frame, after_else)
            return Cond(f"not ({text})", site, None, facts, _only_raises(stmt.body))
        if else_end is True:
            self._restore(frame, after_body)
            return Cond(text, site, None, facts, _only_raises(stmt.orelse))
        self._restore(frame, self._join(after_body, after_else, why))
        partial = body_end or else_end
        if isinstance(partial, Cond):
            return Cond(f"no early return under {text}", site, None, facts)
        return None

    def narrow(self, test: ast.expr, frame: Frame, holds: bool) -> None:
        """Inside ``if self.x:`` x is truthy, in its ``else`` falsy: keep the alternatives of
        an unknown flag that agree (``if x: x = False`` leaves x False either way)."""
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            self.narrow(test.operand, frame, not holds)
            return
        if isinstance(test, ast.BoolOp):
            if isinstance(test.op, ast.And) == holds:  # every operand of a true ``and``...
                for operand in test.values:
                    self.narrow(operand, frame, holds)
            return
        if not isinstance(test, ast.Attribute) or not isinstance(
            self.eval(test.value, frame), ArgsView
        ):
            return
        current = self.state.values.get(test.attr)
        if isinstance(current, Unknown) and current.alternatives:
            kept = [v for v in current.alternatives if truth(v) is holds]
            if len(kept) == 1:
                self.state.values[test.attr] = kept[0]
            elif kept and len(kept) < len(current.alternatives):
                self.state.values[test.attr] = Unknown(current.why, tuple(kept))

    def _branch(
        self, body: list[ast.stmt], frame: Frame, returned: list[Any], cond: Cond
    ) -> bool | Cond:
        """Run one side of an unknown ``if``: True when it ends the function (return/raise), a
        condition when it may end it part-way, False otherwise."""
        self.path.append(cond)
        try:
            guard = self.exec_block(body, frame, returned)
        except _Return as done:
            returned.append(done.value)
            return True
        except _Raise:
            return True
        except (_Break, _Continue):
            return False
        finally:
            self.path.pop()
        return guard if guard is not None else False

    def maybe(
        self,
        run: Callable[[], Cond | None],
        frame: Frame,
        why: str,
        returned: list[Any],
        body: list[ast.stmt] | None = None,
    ) -> Cond | None:
        """Run a block that may or may not run (a loop body, an unknown case): join after.

        When the block may have returned or raised, what follows it runs only if it did not:
        the returned condition says so (unknown), and the caller keeps it on the path.
        """
        before = self._snapshot(frame)
        ended = False
        try:
            ended = run() is not None
        except (_Break, _Continue):
            pass
        except _Raise:
            ended = True
        except _Return as done:
            returned.append(done.value)
            ended = True
        after = self._snapshot(frame)
        self._restore(frame, self._join(before, after, why))
        if ended:
            return Cond(
                f"{why} did not end the function",
                Site(self.world.path(frame.module), 0),
                None,
                frozenset(),
                body is not None and _only_raises(body),
            )
        return None

    def _snapshot(self, frame: Frame) -> tuple[dict[str, Any], dict[str, Any]]:
        return self.state.copy(), dict(frame.locals)

    def _restore(self, frame: Frame, snapshot: tuple[dict[str, Any], dict[str, Any]]) -> None:
        self.state.values = dict(snapshot[0])
        frame.locals = dict(snapshot[1])

    def _join(
        self,
        a: tuple[dict[str, Any], dict[str, Any]],
        b: tuple[dict[str, Any], dict[str, Any]],
        why: str,
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        flags = dict(a[0])
        for name, value in b[0].items():
            if name not in flags:
                flags[name] = value
            elif flags[name] is not value:
                flags[name] = join(flags[name], value, why)
        local = {}
        for name in set(a[1]) | set(b[1]):
            if name in a[1] and name in b[1]:
                local[name] = (
                    join(a[1][name], b[1][name], why)
                    if a[1][name] is not b[1][name]
                    else a[1][name]
                )
            else:
                local[name] = Unknown(why)
        return flags, local

    def exec_for(
        self, stmt: ast.For | ast.AsyncFor, frame: Frame, returned: list[Any]
    ) -> Cond | None:
        items = self.iterable(self.eval(stmt.iter, frame))
        if items is not None and len(items) <= _MAX_LOOP:
            guard: Cond | None = None
            try:
                for item in items:
                    self.store(stmt.target, item, frame, stmt)
                    try:
                        guard = self.exec_block(stmt.body, frame, returned) or guard
                    except _Continue:
                        continue
            except _Break:
                return guard
            return self.exec_block(stmt.orelse, frame, returned) or guard

        def body() -> Cond | None:
            self.store(stmt.target, Unknown(stmt.iter), frame, stmt)
            return self.exec_block(stmt.body, frame, returned)

        return self.maybe(body, frame, f"a loop over {self.src(stmt.iter)}", returned, stmt.body)

    def iterable(self, value: Any) -> list[Any] | None:
        """The items a ``for`` goes through, when known: a container, or an enum's members."""
        if isinstance(value, dict):
            return list(value)
        if isinstance(value, list | tuple | set | frozenset):
            return list(value)
        if isinstance(value, _DICT_VIEWS):
            return list(value)
        if isinstance(value, ClassRef) and value.is_enum:
            members = []
            for stmt in value.node.body:
                for name in sorted(_assigned_names(stmt)):
                    member = self.enum_member(value, name)
                    if isinstance(member, EnumMember):
                        members.append(member)
            return members
        return None

    def exec_try(
        self, stmt: ast.Try | ast.TryStar, frame: Frame, returned: list[Any]
    ) -> Cond | None:
        guard: Cond | None = None
        try:
            try:
                guard = self.exec_block(stmt.body, frame, returned)
            except _Raise:
                if not stmt.handlers:
                    raise
                return self.exec_block(stmt.handlers[0].body, frame, returned)
            guard = self.exec_block(stmt.orelse, frame, returned) or guard
        finally:
            if stmt.finalbody:
                self.exec_block(stmt.finalbody, frame, returned)
        return guard

    def exec_assert(self, stmt: ast.Assert, frame: Frame) -> None:
        test, facts = self.with_facts(lambda: self.eval(stmt.test, frame))
        t = truth(test)
        if t is True:
            return
        message = self.eval(stmt.msg, frame) if stmt.msg is not None else None
        text = message if isinstance(message, str) else f"assert {self.src(stmt.test)}"
        site = Site(self.world.path(frame.module), stmt.lineno)
        cond = Cond(f"not ({self.src(stmt.test)})", site, None if t is None else True, facts)
        self.refusals.append(Refusal(squeeze(text, 300), site, (*self.path, cond)))
        if t is False:
            raise _Raise()

    def refuse(self, stmt: ast.Raise, frame: Frame) -> None:
        message = ""
        if isinstance(stmt.exc, ast.Call) and stmt.exc.args:
            value = self.eval(stmt.exc.args[0], frame)
            message = (
                value
                if isinstance(value, str)
                else (help_text(stmt.exc.args[0], self.world.text(frame.module)) or "")
            )
        elif stmt.exc is not None:
            message = self.src(stmt.exc)
        site = Site(self.world.path(frame.module), stmt.lineno)
        self.refusals.append(Refusal(squeeze(message, 300), site, tuple(self.path)))

    def exec_import(self, stmt: ast.Import | ast.ImportFrom, frame: Frame) -> None:
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if alias.asname:
                    frame.locals[alias.asname] = self.import_value(alias.name, None)
                else:
                    top = alias.name.split(".")[0]
                    frame.locals[top] = self.import_value(top, None)
            return
        base = absolute_module(frame.module, self.world.path(frame.module), stmt.module, stmt.level)
        if base is None:
            return
        for alias in stmt.names:
            if alias.name != "*":
                frame.locals[alias.asname or alias.name] = self.import_value(base, alias.name)

    def store(
        self,
        target: ast.expr,
        value: Any,
        frame: Frame,
        stmt: ast.AST,
        facts: frozenset[Fact] = frozenset(),
    ) -> None:
        if isinstance(target, ast.Name):
            frame.locals[target.id] = value
        elif isinstance(target, ast.Attribute):
            self.store_attribute(self.eval(target.value, frame), target.attr, value, stmt, facts)
        elif isinstance(target, ast.Subscript):
            base = self.eval(target.value, frame)
            key = self.eval(target.slice, frame)
            if isinstance(base, dict) and _known(key):
                try:
                    base[key] = value
                except TypeError:
                    pass
            elif isinstance(base, ArgsView) and isinstance(key, str) and key in self.state.values:
                self.assign_flag(key, value, stmt, facts)
        elif isinstance(target, ast.Tuple | ast.List):
            if isinstance(value, list | tuple) and len(value) == len(target.elts):
                for element, item in zip(target.elts, value, strict=True):
                    self.store(element, item, frame, stmt)
            else:
                for element in target.elts:
                    self.store(element, Unknown(stmt), frame, stmt)

    def store_attribute(
        self,
        base: Any,
        name: str,
        value: Any,
        stmt: ast.AST,
        facts: frozenset[Fact] = frozenset(),
    ) -> None:
        """``base.name = value`` (or ``setattr(base, "name", value)``)."""
        if isinstance(base, ArgsView):
            if name in self.state.values:
                self.assign_flag(name, value, stmt, facts)
        elif isinstance(base, KindView):
            # an object holding flags under its own names (vLLM's ``kernel_config``)
            flag = self.access.objects.get(base.kind, {}).get(name)
            if flag is not None and not isinstance(value, Unknown):
                self.assign_flag(flag, value, stmt, facts)
        elif isinstance(base, Instance):
            base.attrs[name] = value
            # a config object's own field written where it is built (vLLM's
            # ``ParallelConfig.__post_init__`` turning ``numa_bind`` on): the flag's value.
            # Only a value the walk knows: these methods also normalise what they keep
            # (``ModelConfig`` turns "float16" into a torch dtype), which is no override
            field_name = self.config_field(base, name)
            if field_name is not None and not isinstance(value, Unknown):
                self.assign_flag(field_name, value, stmt, facts)

    def assign_flag(
        self, name: str, value: Any, node: ast.AST, value_facts: frozenset[Fact]
    ) -> None:
        module = self._current_module()
        site = Site(self.world.path(module), getattr(node, "lineno", 0))
        function = self._function_name()
        self.state.values[name] = value
        self.state.changed.add(name)
        self.changes.append(
            Change(
                name,
                value,
                site,
                function,
                tuple(self.path),
                self._warning_near(module),
                value_facts,
            )
        )

    def _function_name(self) -> str:
        if not self._stack:
            return "<resolution>"
        node = self._stack[-1]
        return getattr(node, "name", "<lambda>")

    def _warning_near(self, module: str) -> str | None:
        """The message a log call in the assignment's block writes: the override's warning."""
        if not self._blocks:
            return None
        for stmt in self._blocks[-1][1]:
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
                func = stmt.value.func
                if isinstance(func, ast.Attribute) and func.attr in _LOG and stmt.value.args:
                    return help_text(stmt.value.args[0], self.world.text(module))
        return None


def _only_raises(body: list[ast.stmt]) -> bool:
    """A block that can end the function only by raising: no ``return`` in it (nested
    functions aside). What follows it runs unless the engine refused already."""
    todo: list[ast.AST] = list(body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Return):
            return False
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            continue
        todo.extend(ast.iter_child_nodes(node))
    return True
