"""The flags a user means to set: from ``--flags "..."`` or a server config of
``examples/servers*.toml``, matched against the engine version's own definitions.

A flag the version does not define is kept with the nearest spellings the version has (a
renamed or removed flag is a finding, not an error).
"""

from __future__ import annotations

import difflib
import json
import shlex
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledger.errors import InvalidInput, NotFound
from ledger.input_files import load_toml

from .definitions import FlagDefinition
from .index import VersionIndex


@dataclass
class GivenFlag:
    spelling: str  # as the user wrote it, without dashes
    raw: Any  # the value as given: True for a bare switch, else text / number / list
    definition: FlagDefinition | None = None
    value: Any = None  # converted to the field's type
    nearest: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Const:
    """The constant an alias option stores (``const_value=Backend.BREAKABLE``), as written in
    ``module``: the walk evaluates it there."""

    module: str
    text: str

    def __str__(self) -> str:
        return self.text


def flag_words(flag: str, value: Any) -> str:
    """The flag as a shell gives it, for ``--flags``: a list stays several words (``1 5 10``), a
    value the shell would change is quoted as its user would quote it (JSON:
    ``'{"top_k": 1024}'``). None, "" and True: the bare switch."""
    if value in (None, "", True):
        return flag
    text = str(value)
    return f"{flag} {text if shlex.split(text) == text.split() else shlex.quote(text)}"


def parse_flag_string(text: str) -> list[tuple[str, Any]]:
    """``--tp 4 --enable-x --mode=a`` -> [("tp", "4"), ("enable-x", True), ("mode", "a")]."""
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise InvalidInput(f"--flags: {exc}") from None
    out: list[tuple[str, Any]] = []
    index = 0
    while index < len(words):
        word = words[index]
        if not word.startswith("-"):
            raise InvalidInput(f"--flags: {word!r} is not a flag (flags start with --)")
        name = word.lstrip("-")
        if "=" in name:
            name, value = name.split("=", 1)
            out.append((name, value))
            index += 1
            continue
        values: list[str] = []
        index += 1
        while index < len(words) and not (
            words[index].startswith("--") or _is_short_flag(words[index])
        ):
            values.append(words[index])
            index += 1
        out.append((name, True if not values else values[0] if len(values) == 1 else values))
    return out


def _is_short_flag(word: str) -> bool:
    return len(word) == 2 and word[0] == "-" and word[1].isalpha()


def load_server_config(path: Path, name: str | None) -> tuple[str | None, list[tuple[str, Any]]]:
    """The engine and flags of one configuration of a servers TOML (``base`` chains followed)."""
    if not path.exists():  # a device or FIFO is refused by load_toml: not a regular file
        raise NotFound(f"{path}: no such server config file")
    try:
        data = load_toml(path)  # a regular file of at most 1 MiB, nesting bounded
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"{path}: not TOML: {exc}") from None
    configs = data.get("configs")
    if not isinstance(configs, dict) or not configs:
        raise InvalidInput(f"{path}: no [configs.NAME] tables")
    if name is None:
        if len(configs) != 1:
            raise InvalidInput(f"{path}: name one of {', '.join(sorted(configs))} (--config-name)")
        name = next(iter(configs))
    if name not in configs:
        raise NotFound(f"{path}: no configuration {name!r} (has {', '.join(sorted(configs))})")
    chain: list[dict[str, Any]] = []
    current: str | None = name
    while current is not None:
        table = configs.get(current)
        if not isinstance(table, dict) or len(chain) > 32:
            raise InvalidInput(f"{path}: configs.{current}: missing or a cycle of base")
        chain.append(table)
        base = table.get("base")
        current = base if isinstance(base, str) else None
    engine: str | None = None
    flags: dict[str, Any] = {}
    for table in reversed(chain):
        engine = table.get("engine", engine)
        for key, value in (table.get("flags") or {}).items():
            flags[str(key)] = value
    return engine, [(key, value) for key, value in flags.items() if value is not False]


def given_flags(
    config: Path | None, config_name: str | None, flag_text: str | None
) -> tuple[str | None, list[tuple[str, Any]]]:
    """The engine of a server config (None without one) and the flags meant to be set: the
    config's, then those of a ``--flags`` command line (``tuneledger research`` and the MCP
    server's ``research_flags`` take the same two inputs)."""
    engine, given = load_server_config(config, config_name) if config is not None else (None, [])
    if flag_text:
        given.extend(parse_flag_string(flag_text))
    return engine, given


def match_flags(index: VersionIndex, given: list[tuple[str, Any]]) -> list[GivenFlag]:
    options = sorted({o.lstrip("-") for d in index.definitions.values() for o in d.options})
    out: list[GivenFlag] = []
    for spelling, raw in given:
        definition = index.flag(spelling)
        flag = GivenFlag(spelling.lstrip("-"), raw, definition)
        if definition is None:
            flag.nearest = difflib.get_close_matches(flag.spelling, options, n=3, cutoff=0.6)
        else:
            const = definition.extra.get(f"const --{flag.spelling}")
            if const is not None:
                module, _, text = const.partition("|")
                flag.value = Const(module, text)
            else:
                flag.value = convert(definition, raw)
        out.append(flag)
    return out


def convert(definition: FlagDefinition, raw: Any) -> Any:
    """The value the engine's parser would store for what was given (best effort)."""
    kind = (definition.type_text or "").replace(" ", "")
    parser = definition.extra.get("type_parser", "") + kind
    if isinstance(raw, str) and raw.lstrip().startswith(("{", "[")) and _json_typed(parser):
        # ``Arg(type_parser=json.loads)``, ``type=json.loads``, ``Optional[Dict[str, Any]]``:
        # the parser stores the object the text spells, not the text
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    if raw is True or kind in ("bool", "Optional[bool]") or "store_true" in kind:
        if isinstance(raw, str):
            return raw.lower() not in ("false", "0", "no", "off")
        return True if raw is True else bool(raw)
    if isinstance(raw, list):
        return [_scalar(kind, item) for item in raw]
    if kind.startswith(("List[", "list[", "Optional[List[", "Optional[list[")) and isinstance(
        raw, str
    ):
        return [_scalar(kind, item) for item in raw.split()]
    return _scalar(kind, raw)


def _json_typed(parser: str) -> bool:
    return "json" in parser.lower() or any(
        t in parser for t in ("Dict[", "dict[", "dict|", "|dict")
    )


def _scalar(kind: str, raw: Any) -> Any:
    if not isinstance(raw, str):
        return raw
    if "int" in kind and "str" not in kind:
        try:
            return int(raw)
        except ValueError:
            return raw
    if "float" in kind:
        try:
            return float(raw)
        except ValueError:
            return raw
    return raw
