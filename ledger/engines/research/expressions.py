"""Expressions: constants, names, attributes, subscripts, comparisons, ``and``/``or``, calls' arguments, comprehensions; each three-valued and citing the facts it rests on."""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from typing import Any

from .base import InterpreterBase
from .primitives import CudaVersion
from .pybuiltins import BUILTINS
from .pysource import squeeze
from .records import (
    _BINOPS,
    _COMPARE,
    _MAX_LOOP,
    _MIRROR,
    _MISSING,
    _TOPK_NAMES,
    ArgsView,
    Budget,
    Frame,
    _Break,
    _cap_tuple,
    _Continue,
    _known,
    _Raise,
    _Return,
    _same,
    _version_tuple,
    join,
)
from .values import (
    HARDWARE,
    MODEL,
    ClassRef,
    ConfigObject,
    DeviceCapability,
    External,
    Fact,
    FunctionRef,
    Holding,
    Unknown,
    show,
    truth,
)

#: The modules a server is started as (``python -m sglang.launch_server``): ``__name__`` is
#: ``"__main__"`` there only. Another module's ``if __name__ == "__main__":`` block is a program
#: of its own (a weight-cache daemon, a kernel tuner), not this server's start.
#: How a text-generation architecture's name ends (vLLM runs others as pooling models).
_GENERATIVE = ("ForCausalLM", "ForConditionalGeneration", "LMHeadModel")
SERVER_MAIN_MODULES = frozenset(
    {"sglang.launch_server", "vllm.entrypoints.openai.api_server", "vllm.entrypoints.cli.main"}
)


class Expressions(InterpreterBase):
    def note(self, fact: Fact) -> None:
        self._facts[-1].add(fact)

    def with_facts(self, thunk: Callable[[], Any]) -> tuple[Any, frozenset[Fact]]:
        self._facts.append(set())
        try:
            value = thunk()
        finally:
            facts = frozenset(self._facts.pop())
        return value, facts

    def _eval_with_facts(self, node: ast.expr, frame: Frame) -> tuple[Any, frozenset[Fact]]:
        return self.with_facts(lambda: self.eval(node, frame))

    def _merge_facts(self, facts: Iterable[Fact]) -> None:
        self._facts[-1].update(facts)

    def allow(self, steps: int) -> None:
        """A fresh step budget for one evaluation (a gate, a default)."""
        self._steps = 0
        self._max_steps = steps

    def tick(self) -> None:
        self._steps += 1
        if self._steps > self._max_steps:
            self.exhausted = True
            raise Budget()

    def eval(self, node: ast.expr, frame: Frame) -> Any:
        self.tick()
        try:
            method = getattr(self, "_e_" + type(node).__name__, None)
            if method is None:
                return Unknown(node)
            return method(node, frame)
        except (Budget, _Return, _Raise, _Break, _Continue):
            raise
        except RecursionError:
            return Unknown(node)
        except Exception:
            return Unknown(node)

    def src(self, node: ast.AST, frame: Frame | None = None) -> str:
        known = self._src.get(id(node))
        if known is not None and known[0] is node:
            return known[1]
        try:
            text = squeeze(ast.unparse(node), 120)
        except Exception:
            text = type(node).__name__
        self._src[id(node)] = (node, text)
        return text

    def supported_tasks(self) -> Any:
        """vLLM's ``engine_client.get_supported_tasks()``: a text-generation architecture run as
        a generator (no pooling ``--runner``/``--convert``/``--task``) supports "generate"; what
        else it supports (transcription, say) is not known."""
        model = self.target.model
        arch = model.architecture if model is not None else None
        if arch is None:
            return Unknown("the model's tasks (give --model-config)")
        for flag, plain in (("runner", "generate"), ("convert", "none"), ("task", "generate")):
            given = self.state.values.get(flag)
            if given not in (None, "auto", plain):
                return Unknown(f"the tasks of --{flag} {show(given)}")
        if not arch.endswith(_GENERATIVE):
            return Unknown(f"the tasks {arch} supports")
        self.note(Fact(MODEL, "tasks", f"{arch}: a text-generation model (supports generate)"))
        return Holding(f"the tasks {arch} supports", frozenset({"generate"}))

    def _e_Await(self, node: ast.Await, frame: Frame) -> Any:
        # a coroutine's call is walked as a plain call: its result is what it returns
        return self.eval(node.value, frame)

    def _e_Constant(self, node: ast.Constant, frame: Frame) -> Any:
        return node.value

    def _e_Name(self, node: ast.Name, frame: Frame) -> Any:
        return self.lookup(node.id, frame, node)

    def lookup(self, name: str, frame: Frame, node: ast.AST | None = None) -> Any:
        if name in frame.locals:
            return frame.locals[name]
        if frame.lazy is not None:
            value = frame.lazy(name)
            if value is not _MISSING:
                frame.locals[name] = value
                return value
        value = self.global_value(frame.module, name)
        if value is _MISSING and name == "__name__":
            return "__main__" if frame.module in SERVER_MAIN_MODULES else frame.module
        if value is _MISSING:
            builtin = BUILTINS.get(name, _MISSING)
            if builtin is not _MISSING:
                return builtin
            if name in _TOPK_NAMES:
                return self.model_topk(name)
            return Unknown(name)
        if isinstance(value, Unknown) and name in _TOPK_NAMES:
            return self.model_topk(name)
        return value

    def model_topk(self, name: str) -> Any:
        model = self.target.model
        if model is None or model.top_k is None:
            return Unknown(f"the model's top-k ({name}; give --model-config)")
        self.note(Fact(MODEL, "top_k", f"model top-k (num_experts_per_tok) = {model.top_k}"))
        return model.top_k

    def _e_Attribute(self, node: ast.Attribute, frame: Frame) -> Any:
        base = self.eval(node.value, frame)
        value = self.attribute(base, node.attr)
        if isinstance(value, Unknown) and node.attr in _TOPK_NAMES:
            return self.model_topk(node.attr)
        return value

    def _e_Subscript(self, node: ast.Subscript, frame: Frame) -> Any:
        if (  # topk_ids.shape[1]: the router's top-k
            isinstance(node.value, ast.Attribute)
            and node.value.attr == "shape"
            and isinstance(node.slice, ast.Constant)
            and node.slice.value in (1, -1)
            and "topk" in ast.unparse(node.value.value).lower().replace("_", "")
        ):
            return self.model_topk(ast.unparse(node))
        base = self.eval(node.value, frame)
        key = self.eval(node.slice, frame)
        return self.subscript(base, key, node)

    def subscript(self, base: Any, key: Any, node: ast.AST) -> Any:
        if isinstance(base, Unknown) and base.alternatives:
            results = [self.subscript(option, key, node) for option in base.alternatives]
            if all(_same(results[0], r) for r in results):
                return results[0]
            return Unknown(base.why)
        if isinstance(base, CudaVersion):
            return base
        if isinstance(base, Unknown) or isinstance(key, Unknown):
            return Unknown(node)
        if isinstance(base, ArgsView) and isinstance(key, str):
            return self.flag_value(key)
        if isinstance(base, ConfigObject):
            return self.config_attr(base, key) if isinstance(key, str) else Unknown(node)
        if isinstance(base, ClassRef) and base.is_enum and isinstance(key, str):
            return self.enum_member(base, key)
        if isinstance(base, list | tuple | str | dict) and _known(key):
            try:
                return base[key]
            except (IndexError, KeyError, TypeError):
                return Unknown(node)
        return Unknown(node)

    def _e_Slice(self, node: ast.Slice, frame: Frame) -> Any:
        parts = [
            self.eval(p, frame) if p is not None else None
            for p in (node.lower, node.upper, node.step)
        ]
        if any(not (p is None or isinstance(p, int)) for p in parts):
            return Unknown(node)
        return slice(*parts)

    def _e_Compare(self, node: ast.Compare, frame: Frame) -> Any:
        left = self.eval(node.left, frame)
        result: Any = True
        for op, comparator in zip(node.ops, node.comparators, strict=True):
            right = self.eval(comparator, frame)
            outcome = self.compare(left, op, right)
            if outcome is False:
                return False
            if isinstance(outcome, Unknown):
                result = outcome
            left = right
        return result

    def compare(self, left: Any, op: ast.cmpop, right: Any) -> Any:
        if isinstance(right, Holding) and isinstance(op, ast.In | ast.NotIn):
            if isinstance(left, str) and left in right.items:
                return isinstance(op, ast.In)
            return Unknown(right.why)
        for side, other, is_left in ((left, right, True), (right, left, False)):
            if isinstance(side, Unknown) and side.alternatives:
                outcomes = [
                    self.compare(option, op, other) if is_left else self.compare(other, op, option)
                    for option in side.alternatives
                ]
                if all(o is True for o in outcomes):
                    return True
                if all(o is False for o in outcomes):
                    return False
                return Unknown(side.why)
        if isinstance(op, ast.Is | ast.IsNot) and (left is None or right is None):
            other = right if left is None else left
            if isinstance(other, CudaVersion):
                return isinstance(op, ast.IsNot)
            if not isinstance(other, Unknown | External) and other is not None:
                return isinstance(op, ast.IsNot)
        if isinstance(left, CudaVersion) or isinstance(right, CudaVersion):
            return self._cuda_compare(left, op, right)
        if isinstance(left, DeviceCapability) or isinstance(right, DeviceCapability):
            left, right = _cap_tuple(left), _cap_tuple(right)
        if (
            not _known(left)
            or not _known(right)
            or isinstance(left, External)
            or isinstance(right, External)
        ):
            return Unknown("a comparison with an unknown value")
        try:
            return bool(_COMPARE[type(op)](left, right))
        except Exception:
            return Unknown("a comparison")

    def _cuda_compare(self, left: Any, op: ast.cmpop, right: Any) -> Any:
        """A CUDA version known only by its floor: ``>= t`` holds when the floor reaches t."""
        version = left if isinstance(left, CudaVersion) else right
        other = _version_tuple(right if left is version else left)
        if other is None:
            return Unknown("the CUDA version (give --cuda)")
        if left is not version:  # t <= v  is  v >= t
            op = _MIRROR.get(type(op), op)
        floor = version.floor
        decided: bool | None = None
        if isinstance(op, ast.GtE) and floor >= other:
            decided = True
        elif isinstance(op, ast.Gt) and floor > other:
            decided = True
        elif isinstance(op, ast.Lt) and floor >= other:
            decided = False
        elif isinstance(op, ast.LtE) and floor > other:
            decided = False
        if decided is None:
            return Unknown("the CUDA version (give --cuda)")
        self.note(
            Fact(
                HARDWARE,
                "cuda",
                f"CUDA >= {floor[0]}.{floor[1]} (the oldest {self.target.arch} runs on)",
            )
        )
        return decided

    def _e_BoolOp(self, node: ast.BoolOp, frame: Frame) -> Any:
        """Three-valued ``and``/``or``. Every operand is looked at, so that an answer decided by
        several (``use_aiter and is_hip()``) cites all of them, the hardware among them."""
        is_and = isinstance(node.op, ast.And)
        unknown: list[Any] = []
        decided: Any = _MISSING
        decided_facts: set[Fact] = set()
        unknown_facts: set[Fact] = set()
        seen: set[Fact] = set()
        last: Any = None
        for operand in node.values:
            value, facts = self._eval_with_facts(operand, frame)
            seen |= facts
            t = truth(value)
            if t is None:
                unknown.append(value)
                unknown_facts |= facts
            elif t is (not is_and):  # a false operand of ``and``, a true one of ``or``
                if decided is _MISSING:
                    decided = value
                decided_facts |= facts
            else:
                last = value
        if decided is not _MISSING:
            self._merge_facts(decided_facts)
            return decided
        self._merge_facts(seen)
        if unknown:
            result = Unknown(
                "; ".join(v.why if isinstance(v, Unknown) else show(v) for v in unknown)
            )
            result.waits_on = frozenset(unknown_facts)
            return result
        return last

    def _e_UnaryOp(self, node: ast.UnaryOp, frame: Frame) -> Any:
        value = self.eval(node.operand, frame)
        if isinstance(node.op, ast.Not):
            t = truth(value)
            return (
                Unknown(value.why if isinstance(value, Unknown) else "not") if t is None else not t
            )
        if isinstance(node.op, ast.USub) and isinstance(value, int | float):
            return -value
        return Unknown(node)

    def _e_BinOp(self, node: ast.BinOp, frame: Frame) -> Any:
        left, right = self.eval(node.left, frame), self.eval(node.right, frame)
        if isinstance(left, DeviceCapability) or isinstance(right, DeviceCapability):
            return Unknown(node)
        if isinstance(node.op, ast.BitOr) and _classes(left) and _classes(right):
            # ``A | B`` of classes (a union, as ``isinstance`` takes it): the classes' tuple
            return (*_as_tuple(left), *_as_tuple(right))
        if _known(left) and _known(right) and type(node.op) in _BINOPS:
            if isinstance(left, External | CudaVersion) or isinstance(
                right, External | CudaVersion
            ):
                return Unknown(node)
            try:
                return _BINOPS[type(node.op)](left, right)
            except Exception:
                return Unknown(node)
        return Unknown(node)

    def _e_IfExp(self, node: ast.IfExp, frame: Frame) -> Any:
        test = self.eval(node.test, frame)
        t = truth(test)
        if t is True:
            return self.eval(node.body, frame)
        if t is False:
            return self.eval(node.orelse, frame)
        a, b = self.eval(node.body, frame), self.eval(node.orelse, frame)
        return join(a, b, self.src(node.test))

    def _e_List(self, node: ast.List, frame: Frame) -> Any:
        return self._elements(node.elts, frame)

    def _e_Tuple(self, node: ast.Tuple, frame: Frame) -> Any:
        items = self._elements(node.elts, frame)
        return tuple(items) if isinstance(items, list) else items

    def _e_Set(self, node: ast.Set, frame: Frame) -> Any:
        items = self._elements(node.elts, frame)
        if isinstance(items, list):
            try:
                return set(items)
            except TypeError:
                return Unknown("a set")
        return items

    def _elements(self, elts: list[ast.expr], frame: Frame) -> Any:
        out: list[Any] = []
        for element in elts:
            if isinstance(element, ast.Starred):
                inner = self.eval(element.value, frame)
                if isinstance(inner, list | tuple | set | frozenset):
                    out.extend(inner)
                else:
                    return Unknown("a starred list")
            else:
                out.append(self.eval(element, frame))
        return out

    def _e_Dict(self, node: ast.Dict, frame: Frame) -> Any:
        out: dict[Any, Any] = {}
        for key, value in zip(node.keys, node.values, strict=True):
            if key is None:
                merged = self.eval(value, frame)
                if not isinstance(merged, dict):
                    return Unknown("a dict merged in")
                out.update(merged)
                continue
            k = self.eval(key, frame)
            if isinstance(k, Unknown):
                return Unknown("a dict with an unknown key")
            try:
                out[k] = self.eval(value, frame)
            except TypeError:
                return Unknown("a dict")
        return out

    def _e_JoinedStr(self, node: ast.JoinedStr, frame: Frame) -> Any:
        parts: list[str] = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value))
            elif isinstance(value, ast.FormattedValue):
                inner = self.eval(value.value, frame)
                if not isinstance(inner, str | int | float | bool | type(None)):
                    return Unknown("an f-string")
                parts.append(str(inner))
        return "".join(parts)

    def _e_Lambda(self, node: ast.Lambda, frame: Frame) -> Any:
        closure = frame.locals if frame.function != "<module>" else None
        return FunctionRef(frame.module, "<lambda>", node, closure=closure)

    def _e_NamedExpr(self, node: ast.NamedExpr, frame: Frame) -> Any:
        value = self.eval(node.value, frame)
        frame.locals[node.target.id] = value
        return value

    def _e_GeneratorExp(self, node: ast.GeneratorExp, frame: Frame) -> Any:
        return self._comprehension(node, frame)

    def _e_ListComp(self, node: ast.ListComp, frame: Frame) -> Any:
        return self._comprehension(node, frame)

    def _e_SetComp(self, node: ast.SetComp, frame: Frame) -> Any:
        result = self._comprehension(node, frame)
        return set(result) if isinstance(result, list) else result

    def _comprehension(
        self, node: ast.GeneratorExp | ast.ListComp | ast.SetComp, frame: Frame
    ) -> Any:
        if len(node.generators) != 1 or not isinstance(node.generators[0].target, ast.Name):
            return Unknown(node)
        generator = node.generators[0]
        assert isinstance(generator.target, ast.Name)
        items = self.eval(generator.iter, frame)
        if not isinstance(items, list | tuple | set | frozenset | dict) or len(items) > _MAX_LOOP:
            return Unknown(node)
        inner = Frame(frame.module, dict(frame.locals), frame.function, frame.lazy)
        out: list[Any] = []
        for item in items:
            inner.locals[generator.target.id] = item
            keep: Any = True
            for condition in generator.ifs:
                t = truth(self.eval(condition, inner))
                if t is None:
                    return Unknown(condition)
                keep = keep and t
            if keep:
                out.append(self.eval(node.elt, inner))
        return out

    def _e_Call(self, node: ast.Call, frame: Frame) -> Any:
        if isinstance(node.func, ast.Attribute) and node.func.attr == "get_supported_tasks":
            # vLLM's engine client answers it over RPC from the model's runner: a model fact
            return self.supported_tasks()
        function = self.eval(node.func, frame)
        value, facts = self.with_facts(lambda: self._arguments(node, frame))
        self._merge_facts(facts)
        if value is None:
            return self._unknown_call(function, node)
        args, keywords = value
        self._argument_facts = facts
        return self.call(function, args, keywords, node, frame)

    def _arguments(self, node: ast.Call, frame: Frame) -> tuple[list[Any], dict[str, Any]] | None:
        args: list[Any] = []
        for arg in node.args:
            if isinstance(arg, ast.Starred):
                inner = self.eval(arg.value, frame)
                if not isinstance(inner, list | tuple):
                    return None
                args.extend(inner)
            else:
                args.append(self.eval(arg, frame))
        keywords: dict[str, Any] = {}
        for keyword in node.keywords:
            value = self.eval(keyword.value, frame)
            if keyword.arg is None:
                if not (isinstance(value, dict) and all(isinstance(k, str) for k in value)):
                    return None
                keywords.update(value)
            else:
                keywords[keyword.arg] = value
        return args, keywords

    def _unknown_call(self, function: Any, node: ast.Call) -> Any:
        return Unknown(node)


def _classes(value: Any) -> bool:
    return isinstance(value, ClassRef) or (
        isinstance(value, tuple) and bool(value) and all(isinstance(v, ClassRef) for v in value)
    )


def _as_tuple(value: Any) -> tuple[Any, ...]:
    return value if isinstance(value, tuple) else (value,)
