"""Which model files the target's architecture runs (docs/research.md, *Model scope*): the
files registering it (SGLang's ``EntryClass``, vLLM's registry) and the model files they import;
a read, gate or raise in any other model's file never decides a verdict for this model."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .model import ImportSite, Site
from .pysource import module_name
from .values import MODEL, Fact

if TYPE_CHECKING:
    from .gates import GateEval
    from .index import VersionIndex


#: Modules a model scope follows from the selected model files (a bound: the walk stays fast).
_SCOPE_MODULES = 400


@dataclass
class ModelScope:
    """The model files (modules of a package holding ``EntryClass`` files, or vLLM's registry)
    that the target's architecture loads: the files registering it and what they import."""

    architecture: str
    packages: tuple[str, ...]  # the model packages, ``sglang.srt.models``
    selected: frozenset[str]  # the files registering the architecture
    loaded: frozenset[str]  # those and every module they import, transitively
    registered: frozenset[str] = frozenset()  # every architecture the version's files register

    @property
    def fact(self) -> Fact:
        return Fact(MODEL, "architecture", f"model architecture {self.architecture}")

    def is_model_file(self, module: str) -> bool:
        return any(module.startswith(package + ".") for package in self.packages)

    def excludes(self, module: str) -> bool:
        return self.is_model_file(module) and module not in self.loaded

    def gate(self, module: str, path: str) -> GateEval:
        from .gates import GateEval

        text = f"{path} is another model's file ({self.architecture} loads {', '.join(sorted(self.selected))})"
        return GateEval("model-scope", text, Site(path, 0), False, frozenset({self.fact}))


_QUOTED = re.compile(r"""["']([\w.]+)["']""")


def architecture_gates(
    scope: ModelScope | None, decorators: tuple[str, ...], path: str
) -> list[GateEval]:
    """A function registered under model architectures, every name of the decorator one the
    version's model files register (SGLang 0.5.23's ``@_register_for("KimiK3ForConditional
    Generation")`` on a model's argument overrides): it runs for those models only."""
    from .gates import GateEval

    if scope is None:
        return []
    for decorator in decorators:
        names = _QUOTED.findall(decorator)
        if names and set(names) <= scope.registered and scope.architecture not in names:
            text = f"@{decorator.split('(')[0]} runs it for {', '.join(names)} only"
            return [GateEval("model-scope", text, Site(path, 0), False, frozenset({scope.fact}))]
    return []


def model_scope(index: VersionIndex, target: Any) -> ModelScope | None:
    model = target.model
    if model is None or not model.architecture:
        return None
    entries = index.entry_classes
    selected = {module for module, classes in entries.items() if model.architecture in classes}
    if not selected:
        return None  # an architecture no file registers: nothing is excluded
    packages: dict[str, int] = {}
    for module in entries:
        parent = module.rpartition(".")[0]
        packages[parent] = packages.get(parent, 0) + 1
    model_packages = [
        p for p, n in packages.items() if n >= 3 or any(s.startswith(p + ".") for s in selected)
    ]
    packages_found = tuple(sorted(model_packages))

    def is_model(module: str) -> bool:
        return any(module.startswith(package + ".") for package in packages_found)

    # A model with a package of its own (vLLM's ``vllm.models.kimi_k3``): its submodules are
    # that model's files even where code outside the models imports them (a warm-up module
    # that runs for that model only); never a helper shared by every model.
    own = tuple(m + "." for m in entries if m not in selected)
    forward: dict[str, set[str]] = {}
    shared: set[str] = set()  # model-package helpers that code outside the models imports
    for target_module, sites in index.importers.items():
        if target_module not in index.paths or not is_model(target_module):
            continue
        for site in sites:
            importer = _module_of(site)
            if is_model(importer):
                forward.setdefault(importer, set()).add(target_module)
            elif (
                ".test" not in importer
                and target_module not in entries
                and not target_module.startswith(own)
            ):
                shared.add(target_module)
    # Model files import each other's classes (Qwen3.5 builds on Qwen2-MoE's blocks): those
    # run too. An import by code outside the models (a helper, a type) runs no model class.
    loaded = set(selected)
    queue = sorted(selected)
    while queue and len(loaded) < _SCOPE_MODULES:
        current = queue.pop()
        for imported in sorted(forward.get(current, ())):
            if imported not in loaded:
                loaded.add(imported)
                queue.append(imported)
    return ModelScope(
        model.architecture,
        packages_found,
        frozenset(selected),
        frozenset(loaded | shared),
        frozenset(name for classes in entries.values() for name in classes),
    )


def _module_of(site: ImportSite) -> str:
    return module_name(site.site.path)
