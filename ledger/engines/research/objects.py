"""The engine's objects: attributes of the server arguments, the model config, modules, classes and enums, instances; module globals picked by their top-level conditions."""

from __future__ import annotations

import ast
import json
from typing import Any

from .access import ARGS
from .expressions import Expressions
from .primitives import ABSENT_ATTRIBUTES, CALLS, CudaVersion, external_value
from .proxies import self_assignments
from .pybuiltins import BuiltinFunction
from .records import (
    _ABSENT,
    _MISSING,
    _SAFE_METHODS,
    MODEL_CONFIG_CALLS,
    MODEL_CONFIG_CLASSES,
    ArgsView,
    Budget,
    Frame,
    KindView,
    _assigned_names,
    _bases,
    _ModelConfigGetter,
    _same,
    _TextConfigGetter,
)
from .values import (
    FLAG,
    MODEL,
    BoundMethod,
    ClassRef,
    ConfigObject,
    DeviceCapability,
    EnumMember,
    External,
    Fact,
    FunctionRef,
    Instance,
    ModelConfigObject,
    ModuleRef,
    Proxy,
    Unknown,
    show,
    truth,
)
from .world import Binding


class Objects(Expressions):
    absent_kinds: dict[str, frozenset[Fact]]  # set by the interpreter
    class_modules: dict[str, list[str]]  # set by the interpreter

    def attribute(self, base: Any, name: str) -> Any:
        if isinstance(base, Proxy):
            return base.attribute(self, name)
        holder = self.holder(name)
        if holder is not None and not isinstance(base, ConfigObject):
            return holder
        if isinstance(base, ArgsView):
            return self.args_attribute(name)
        if isinstance(base, Unknown):
            if base.alternatives:
                results = [self.attribute(option, name) for option in base.alternatives]
                if all(_same(results[0], r) for r in results):
                    return results[0]
            return Unknown(f"{base.why}.{name}")
        if isinstance(base, ConfigObject):
            return self.config_attr(base, name)
        if isinstance(base, ModelConfigObject):
            return self.model_config_attr(base, name)
        if isinstance(base, ModuleRef):
            return self.module_attribute(base, name)
        if isinstance(base, External):
            return external_value(self, f"{base.dotted}.{name}")
        if isinstance(base, ClassRef):
            return self.class_attribute(base, name, receiver=base)
        if isinstance(base, EnumMember):
            if name == "name":
                return base.name
            if name == "value":
                return base.value
            cls = self._enum_class(base)
            return self.class_attribute(cls, name, receiver=base) if cls else Unknown(name)
        if isinstance(base, Instance):
            if name in base.attrs:
                value = base.attrs[name]
                # a config object's field of a flag (vLLM's ``ParallelConfig``): the
                # condition it decides is the flag's, as on the arguments themselves
                field_name = self.config_field(base, name)
                if field_name is not None:
                    self.note(Fact(FLAG, field_name, f"{field_name}={show(value)} (config)"))
                return value
            found = self.class_attribute(base.cls, name, receiver=base)
            if isinstance(found, Unknown) and not name.startswith("__"):
                fallback = self.class_attribute(base.cls, "__getattr__", receiver=base)
                if isinstance(fallback, BoundMethod):
                    return self.call(fallback, [name], {}, fallback.function.node, None)
            return found
        if isinstance(base, FunctionRef):
            if name in ("__name__", "__qualname__"):
                return base.qualname.split(".")[-1] if name == "__name__" else base.qualname
            return Unknown(name)
        if isinstance(base, DeviceCapability):
            return getattr(base, name) if name in ("major", "minor") else Unknown(name)
        if isinstance(base, CudaVersion):
            version = base
            return BuiltinFunction(name, lambda interp, args, keywords, node: version)
        methods = _SAFE_METHODS.get(type(base), frozenset())
        if name in methods:
            return getattr(base, name)
        return Unknown(name)

    def holder(self, name: str) -> Any:
        """``x.server_args``, ``x.cache_config``: by the engine's naming, the object that holds
        flags (the server arguments, a vLLM config), whatever ``x`` is; None for other names."""
        kind = self.access.kind_by_name(name)
        if kind is None:
            return None
        if kind == ARGS:
            return self.args
        return self.kind_view(kind)

    def kind_view(self, kind: str) -> Any:
        """The object that holds a kind of flags; None where the engine does not build it on
        this target (``optional.absent_kinds``), with the facts that decide so."""
        facts = self.absent_kinds.get(kind)
        if facts is None:
            return KindView(kind)
        for fact in facts:
            self.note(fact)
        return None

    def fixed_field(self, kind: str, name: str) -> Any:
        """A field of a config object's class that no constructor argument sets and no method
        of the class assigns: ``is_submodel_config: bool = field(default=False, init=False)``
        is False wherever the engine builds the config itself (a derived view sets it on the
        copy it makes). ``_MISSING`` where the class or such a field is not found."""
        classes = [c for c, k in self.access.self_classes.items() if k == kind]
        for cls_name in classes:
            modules = self.class_modules.get(cls_name, [])
            node = self.world.find_class(modules[0], cls_name) if len(modules) == 1 else None
            if node is None:
                continue
            for stmt in node.body:
                if (
                    isinstance(stmt, ast.AnnAssign)
                    and isinstance(stmt.target, ast.Name)
                    and stmt.target.id == name
                    and isinstance(stmt.value, ast.Call)
                ):
                    keywords = {k.arg: k.value for k in stmt.value.keywords}
                    init, default = keywords.get("init"), keywords.get("default")
                    if (
                        isinstance(init, ast.Constant)
                        and init.value is False
                        and isinstance(default, ast.Constant)
                        and name not in self_assignments(node)
                    ):
                        return default.value
        return _MISSING

    def args_attribute(self, name: str) -> Any:
        if name in self.state.values:
            return self.flag_value(name)
        if (ARGS, name) in self.access.subobjects:
            return self.args
        if name in MODEL_CONFIG_CALLS:
            return _ModelConfigGetter()
        derived = self.access.derived.get(name)
        if derived is not None:
            module, _, function = derived.rpartition(".")
            computes = self.module_attribute(ModuleRef(module, False), function)
            if isinstance(computes, FunctionRef):
                return self.call(computes, [self.args], {}, computes.node, None)
        owner = self._self_class()
        if owner is not None:
            found = self.class_attribute(owner, name, receiver=self.args)
            if not isinstance(found, Unknown):
                return found
        return Unknown(f"server_args.{name}")

    def flag_value(self, name: str) -> Any:
        value = self.state.values.get(name, Unknown(f"--{name.replace('_', '-')}"))
        source = (
            "resolved"
            if name in self.state.changed
            else "given"
            if name in self.state.given
            else "default"
        )
        self.note(Fact(FLAG, name, f"{name}={show(value)} ({source})"))
        return value

    def _self_class(self) -> ClassRef | None:
        """The arguments' own class (``ServerArgs``): its methods are the arguments' methods."""
        if self._self_ref is False:
            node = self.world.find_class(self.self_module, self.self_class)
            self._self_ref = (
                ClassRef(self.self_module, self.self_class, node, _bases(node)) if node else None
            )
        return self._self_ref if isinstance(self._self_ref, ClassRef) else None

    def config_attr(self, base: ConfigObject, name: str) -> Any:
        if name in base.data:
            value = base.data[name]
            self.note(Fact(MODEL, name, f"model {base.path}.{name} = {show(value)}"))
            if isinstance(value, dict):
                return ConfigObject(value, f"{base.path}.{name}")
            return value
        if name in ("get_text_config", "text_config") and "text_config" in base.data:
            return (
                self.config_attr(base, "text_config")
                if name == "text_config"
                else _TextConfigGetter(base)
            )
        if name == "get_text_config" and not _SUB_CONFIGS & base.data.keys():
            return _TextConfigGetter(base)  # transformers: a config with no sub-config is its own
        return Unknown(f"model config {name}")

    def config_class(self, config: ConfigObject) -> ClassRef | None | bool:
        """The package's class of a model config, by its ``model_type`` (each transformers
        config class names its own); False: no class of the package has that model type (the
        config is one of transformers' own classes); None: not known."""
        model_type = config.data.get("model_type")
        if not isinstance(model_type, str):
            return None
        if self._config_classes is None:  # no index's table handed in: not known
            return None
        found = self._config_classes.get(model_type, [])
        if len(found) != 1:
            return False if not found else None
        module, name = found[0]
        node = self.world.find_class(module, name)
        return ClassRef(module, name, node, _bases(node)) if node is not None else None

    def model_config_attr(self, base: ModelConfigObject, name: str) -> Any:
        if base.hf is None:
            return Unknown("the model (give --model-config)")
        if name in ("hf_config", "hf_text_config"):
            if name == "hf_text_config" and isinstance(base.hf.data.get("text_config"), dict):
                return ConfigObject(base.hf.data["text_config"], "config.text_config")
            return base.hf
        derived = self.derived_model_attribute(base, name)
        if derived is not _MISSING:
            return derived
        return Unknown(f"model_config.{name}")

    def derived_model_attribute(self, base: ModelConfigObject, name: str) -> Any:
        """An attribute the engine's model-config class computes from ``hf_config`` in one
        method of its own that takes nothing but ``self`` (SGLang's ``_derive_model_shapes``
        sets ``attention_arch`` by the architecture): that method walked on the target's
        config. ``_MISSING`` where no such method, or several, assign it."""
        found = MODEL_CONFIG_CLASSES.get(self.self_module.split(".")[0])
        if found is None or base.hf is None:
            return _MISSING
        module, class_name = found
        node = self.world.find_class(module, class_name)
        if node is None:
            return _MISSING
        methods = _derivations(node).get(name, [])
        if len(methods) != 1:
            return _MISSING
        cls = ClassRef(module, class_name, node, _bases(node))
        # the method sees the model's config only, not the flags: walked once for a class's
        # source and a model, apart from the calls' results
        # that a change of flags forgets
        method = methods[0]
        source = hash(self.world.text(module))
        key = (source, class_name, method, json.dumps(base.hf.data, sort_keys=True, default=str))
        if key not in _DERIVED:
            _DERIVED[key] = self.with_facts(lambda: self._derive(cls, base, method))
        instance, facts = _DERIVED[key]
        self._merge_facts(f for f in facts if f.kind == MODEL)
        return instance.attrs.get(name, Unknown(f"model_config.{name}"))

    def _derive(self, cls: ClassRef, base: ModelConfigObject, method: str) -> Instance:
        """Run one of the model-config class's own methods on a fresh object holding the model's
        config; what the walk records meanwhile (changes, refusals, log lines, the path) is not
        the resolution's."""
        assert base.hf is not None
        instance = Instance(cls)
        text = base.hf.data.get("text_config")
        instance.attrs["hf_config"] = base.hf
        instance.attrs["hf_text_config"] = (
            ConfigObject(text, "config.text_config") if isinstance(text, dict) else base.hf
        )
        kept = (list(self.changes), list(self.refusals), list(self.logged), list(self.path))
        self.path = []
        try:
            bound = self.class_attribute(cls, method, receiver=instance)
            self.call(bound, [], {}, ast.Expr(value=ast.Constant(None)), None)
        except Budget:
            return Instance(cls)
        finally:
            self.changes, self.refusals, self.logged, self.path = kept
        return instance

    def module_attribute(self, base: ModuleRef, name: str) -> Any:
        dotted = f"{base.name}.{name}"
        if base.external:
            if dotted in ABSENT_ATTRIBUTES:
                return _ABSENT
            return external_value(self, dotted)
        value = self.global_value(base.name, name)
        if value is _MISSING or isinstance(value, Unknown):
            if self.world.has_module(dotted):
                return ModuleRef(dotted, False)
        if (value is _MISSING or isinstance(value, Unknown)) and not name.startswith("__"):
            # PEP 562: a module's own ``__getattr__`` answers the names it does not bind
            # (vLLM's ``envs``: each variable read from the environment when asked for); its
            # ``def``, though a later ``global __getattr__`` wraps it in a cache: same answers
            hook = next(
                (
                    b.node
                    for b in self.world.bindings(base.name).get("__getattr__", [])
                    if b.kind == "def" and isinstance(b.node, ast.FunctionDef)
                ),
                None,
            )
            if hook is not None and not hook.decorator_list:
                function = FunctionRef(base.name, "__getattr__", hook, None)
                answer = self.call(function, [name], {}, hook, None)
                if not isinstance(answer, Unknown):
                    return answer
        return Unknown(dotted) if value is _MISSING else value

    def config_field(self, base: Instance, name: str) -> str | None:
        """The flag a config object's attribute holds (``ParallelConfig.numa_bind``), if any."""
        kind = self.access.self_classes.get(base.cls.name)
        field_name = self.access.objects.get(kind or "", {}).get(name)
        return field_name if field_name is not None and field_name in self.state.values else None

    def class_attribute(self, cls: ClassRef, name: str, receiver: Any) -> Any:
        for klass in self._mro(cls):
            for stmt in klass.node.body:
                if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef) and stmt.name == name:
                    function = FunctionRef(klass.module, f"{klass.name}.{name}", stmt, klass)
                    decorators = {ast.unparse(d) for d in stmt.decorator_list}
                    if "staticmethod" in decorators:
                        return function
                    if "property" in decorators or "cached_property" in decorators:
                        return self.call(BoundMethod(function, receiver), [], {}, stmt, None)
                    if "classmethod" in decorators:
                        return BoundMethod(function, klass)
                    return BoundMethod(function, receiver) if receiver is not klass else function
                targets = _assigned_names(stmt)
                if name in targets and isinstance(stmt, ast.Assign | ast.AnnAssign):
                    if klass.is_enum:
                        return self.enum_member(klass, name)
                    value = stmt.value
                    if value is None:
                        continue
                    return self._named(self.eval(value, Frame(klass.module)), klass, name, stmt)
        return Unknown(f"{cls.name}.{name}")

    def _named(self, value: Any, owner: ClassRef, name: str, stmt: ast.stmt) -> Any:
        """A class attribute holding an object whose class defines ``__set_name__`` (a
        descriptor: SGLang's ``EnvBool(True)`` fields of ``Envs`` learn their variable's name
        so): Python calls it when the class is made; so does the walk, when it is read."""
        if isinstance(value, Instance):
            hook = self.class_attribute(value.cls, "__set_name__", receiver=value)
            if isinstance(hook, BoundMethod):
                self.call(hook, [owner, name], {}, stmt, None)
        return value

    def _mro(self, cls: ClassRef, depth: int = 0) -> list[ClassRef]:
        out = [cls]
        if depth > 6:
            return out
        for base in cls.node.bases:
            resolved = self.eval(base, Frame(cls.module))
            if isinstance(resolved, ClassRef):
                out.extend(self._mro(resolved, depth + 1))
        return out

    def enum_member(self, cls: ClassRef, name: str) -> Any:
        for stmt in cls.node.body:
            if name in _assigned_names(stmt) and isinstance(stmt, ast.Assign):
                value = self.eval(stmt.value, Frame(cls.module))
                return EnumMember(f"{cls.module}.{cls.name}", name, value)
        return Unknown(f"{cls.name}[{name!r}]")

    def _enum_class(self, member: EnumMember) -> ClassRef | None:
        module, _, name = member.owner.rpartition(".")
        node = self.world.find_class(module, name)
        return ClassRef(module, name, node, _bases(node)) if node is not None else None

    def global_value(self, module: str, name: str) -> Any:
        key = (module, name)
        if key in self._globals:
            value, facts = self._globals[key]
            self._merge_facts(facts)
            return value
        if key in self._resolving:
            return Unknown(name)
        table = self.world.bindings(module)
        bindings = table.get(name)
        if not bindings:
            if not name.startswith("_"):
                for star in table.get("*", []):
                    if star.target and self.world.has_module(star.target) and star.target != module:
                        value = self.global_value(star.target, name)
                        if value is not _MISSING:
                            return value
            return _MISSING
        self._resolving.add(key)
        try:
            value, facts = self.with_facts(lambda: self._pick_binding(bindings, name))
        finally:
            self._resolving.discard(key)
        self._globals[key] = (value, facts)
        self._merge_facts(facts)
        return value

    def _pick_binding(self, bindings: list[Binding], name: str) -> Any:
        for binding in reversed(bindings):
            verdict: bool | None = True
            for condition in binding.conditions:
                if condition.expr is None:  # an except block: the import above it worked
                    verdict = False
                    break
                t = truth(self.eval(condition.expr, Frame(binding.module)))
                if t is None:
                    verdict = None
                    break
                if t is condition.negate:
                    verdict = False
                    break
            if verdict is False:
                continue
            if verdict is None:
                return Unknown(name)
            return self._binding_value(binding, name)
        return Unknown(name)

    def _binding_value(self, binding: Binding, name: str) -> Any:
        node = binding.node
        if binding.kind == "assign" and isinstance(node, ast.expr):
            return self.eval(node, Frame(binding.module))
        if binding.kind == "initialized" and isinstance(node, ast.expr):
            # set by a start-up function (world._initialized_globals): its parameters are
            # the flags' holders by the engine's naming (``server_args``), else not known
            params = set((binding.attribute or "").split(","))

            def parameter(local: str) -> Any:
                if local not in params:
                    return _MISSING
                holder = self.holder(local)
                return Unknown(f"parameter {local}") if holder is None else holder

            return self.eval(node, Frame(binding.module, {}, binding.target or "", parameter))
        if binding.kind == "def" and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            return FunctionRef(binding.module, node.name, node)
        if binding.kind == "class" and isinstance(node, ast.ClassDef):
            return ClassRef(binding.module, node.name, node, _bases(node))
        if binding.kind == "import" and binding.target is not None:
            return self.import_value(binding.target, binding.attribute)
        return Unknown(name)

    def import_value(self, target: str, attribute: str | None) -> Any:
        package = self.world.package
        if attribute is None:
            external = target.split(".")[0] != package
            return ModuleRef(target, external)
        if target.split(".")[0] != package:
            dotted = f"{target}.{attribute}"
            if dotted in ABSENT_ATTRIBUTES:
                return _ABSENT
            return external_value(self, dotted)
        dotted = f"{target}.{attribute}"
        if any(name.startswith(dotted + ".") for name in CALLS):
            return External(dotted)  # an object the primitives answer for (current_platform)
        if self.world.has_module(target):
            value = self.global_value(target, attribute)
            if value is not _MISSING and not isinstance(value, Unknown):
                return value
            if self.world.has_module(f"{target}.{attribute}"):
                return ModuleRef(f"{target}.{attribute}", False)
            return Unknown(f"{target}.{attribute}") if value is _MISSING else value
        if self.world.has_module(f"{target}.{attribute}"):
            return ModuleRef(f"{target}.{attribute}", False)
        return Unknown(f"{target}.{attribute}")


#: the keys under which transformers' ``get_text_config`` finds a text sub-config
_SUB_CONFIGS = frozenset({"text_config", "decoder", "generator", "llm_config", "language_config"})


_DERIVATIONS: dict[int, tuple[ast.ClassDef, dict[str, list[str]]]] = {}
#: what a derivation gave, by class, method and model config: the same in every analysis
_DERIVED: dict[tuple[int, str, str, str], tuple[Instance, frozenset[Fact]]] = {}


def _derivations(node: ast.ClassDef) -> dict[str, list[str]]:
    """The class's own methods taking only ``self``, by the ``self.<name>`` each assigns
    (read once per class)."""
    known = _DERIVATIONS.get(id(node))
    if known is not None and known[0] is node:
        return known[1]
    found: dict[str, list[str]] = {}
    for stmt in node.body:
        if not isinstance(stmt, ast.FunctionDef) or stmt.decorator_list:
            continue
        args = stmt.args
        if [a.arg for a in args.args] != ["self"] or args.vararg or args.kwarg or args.kwonlyargs:
            continue
        names = {
            t.attr
            for sub in ast.walk(stmt)
            if isinstance(sub, ast.Assign)
            for t in sub.targets
            if isinstance(t, ast.Attribute)
            and isinstance(t.value, ast.Name)
            and t.value.id == "self"
        }
        for name in names:
            found.setdefault(name, []).append(stmt.name)
    _DERIVATIONS[id(node)] = (node, found)
    return found
