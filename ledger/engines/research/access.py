"""How an engine's code reaches its flags' values: the objects that hold them and their names.

An ``AccessModel`` is data, built from the engine's own definitions (``definitions_*``): which
variable and attribute names hold the server arguments (SGLang: ``server_args``,
``self.server_args``, ``get_global_server_args()``, ``global_server_args_dict[...]``, the
``get_exec().<ns>`` bags; vLLM: the ``*_config`` objects), and which attribute of each object
is which flag. The scanner (``scan``) applies it to every file.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: The kind of object that is the server arguments themselves (attribute name = field name).
ARGS = "args"

#: Names that start so are functions (``handle_server_args``), not objects that hold the args.
_VERBS = (
    "handle",
    "validate",
    "prepare",
    "parse",
    "get",
    "set",
    "check",
    "load",
    "make",
    "build",
    "init",
    "update",
    "resolve",
    "apply",
    "print",
    "dump",
    "from",
    "to",
    "read",
    "write",
    "create",
    "process",
    "convert",
    "copy",
    "patch",
    "override",
    "adjust",
    "compute",
)


@dataclass(frozen=True)
class AccessModel:
    #: object kind -> {attribute -> flag field}
    objects: dict[str, dict[str, str]]
    #: a variable or attribute with exactly this name holds an object of this kind
    names: dict[str, str] = field(default_factory=dict)
    #: ... or a name ending so (``self.model_runner.server_args``)
    suffixes: tuple[tuple[str, str], ...] = ()
    #: a call of a function of this name returns an object of this kind
    getters: dict[str, str] = field(default_factory=dict)
    #: modules where the getters above that are generic names (``get_device``) are defined:
    #: the evaluator trusts such a getter only when the call resolves there
    getter_modules: dict[str, str] = field(default_factory=dict)
    #: (kind, attribute) -> kind: ``get_exec().comm``, ``vllm_config.cache_config``
    subobjects: dict[tuple[str, str], str] = field(default_factory=dict)
    #: a subscript ``X["flag"]`` of a name ending so reads the flag (``global_server_args_dict``)
    dict_suffixes: tuple[str, ...] = ()
    #: inside the argument layer, these names hold the arguments being resolved (``cfg``, ``view``)
    layer_names: dict[str, str] = field(default_factory=dict)
    #: inside a class of this name, ``self`` is an object of this kind
    self_classes: dict[str, str] = field(default_factory=dict)
    #: path prefixes of the argument layer: definition, resolution, validation
    arg_layer: tuple[str, ...] = ()
    #: files of the argument layer where only the argument classes' own code is resolution
    #: (SGLang's server_args.py also holds PortArgs and launch helpers: those run the server)
    mixed_files: tuple[str, ...] = ()
    #: in the argument layer, calls of these names with flag keywords declare values
    declare_calls: tuple[str, ...] = ()
    #: attribute names specific enough to count as a read of the flag on any object
    distinctive: dict[str, str] = field(default_factory=dict)
    #: values of the arguments computed from them by a function (SGLang 0.5.23's ``Derived``
    #: fields: ``num_dp_ranks`` is ``runtime_context.num_dp_ranks_of(cfg)``): name -> dotted
    derived: dict[str, str] = field(default_factory=dict)
    #: names that hold their kind only in files under these prefixes (vLLM's ``args``, the
    #: parsed ``vllm serve`` arguments in ``vllm/entrypoints/``; elsewhere, the benchmarks',
    #: another parser's)
    scoped_names: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def kind_by_name(self, name: str, path: str | None = None) -> str | None:
        """The kind of object a variable or attribute of this name holds, by the naming rule.

        ``server_args``, ``self.server_args``, ``model_runner.server_args`` hold the arguments;
        ``handle_server_args`` and ``validate_server_args`` are functions, not holders.
        """
        if name in self.names:
            scope = self.scoped_names.get(name)
            if path is not None and scope is not None and not path.startswith(scope):
                return None
            return self.names[name]
        for suffix, kind in self.suffixes:
            if name.endswith(suffix) and not name.lstrip("_").startswith(_VERBS):
                return kind
        return None

    def in_arg_layer(self, path: str) -> bool:
        return path.startswith(self.arg_layer)

    def all_fields(self) -> set[str]:
        return {flag for mapping in self.objects.values() for flag in mapping.values()}


def distinctive_names(fields: set[str], min_length: int = 14) -> dict[str, str]:
    """Field names long and compound enough that ``obj.<name>`` is this flag's value.

    Engines copy a flag onto their own objects (``self.enable_mixed_chunk =
    server_args.enable_mixed_chunk``) and read the copy; a name like ``device`` or
    ``dtype`` is everywhere and says nothing, ``enable_mixed_chunk`` says which flag.
    """
    return {name: name for name in fields if name.count("_") >= 2 and len(name) >= min_length}
