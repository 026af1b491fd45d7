"""Named server configurations, kept in a TOML file the user edits (read with ``tomllib``).

Format (see ``examples/servers.toml``)::

    # Optional: more words that mark a flag or env name as secret-bearing (its value is
    # stored as ***; schemas/secrets.py has the built-in list: api-key, token, password, ...).
    secret_words = ["hmac", "signing key"]

    # Optional: applied to every configuration (a configuration's own keys win).
    [defaults]
    engine = "sglang"                  # sglang | vllm | transformers
    host = "127.0.0.1"                 # address the server binds (and is polled on)
    port = 30000                       # default: the engine's (sglang 30000, vllm/transformers 8000);
                                       # 0: a free port, picked each time the server starts
    python = "/opt/venv/bin/python"    # sglang, vllm: interpreter that runs -m sglang.launch_server
                                       # (vllm: -m vllm.entrypoints.openai.api_server)
    health_timeout_s = 1800            # how long start waits for health (seconds; default 30 min)

    [configs.baseline]
    model = "/models/Qwen3.5-122B-A10B"
    flags = { tp = 4, mem-fraction-static = 0.88 }
    env = { SGLANG_MOE_CONFIG_DIR = "/work/moe_configs" }

    [configs.fusion]
    base = "baseline"                  # inherit everything from baseline ...
    flags = { enable-flashinfer-allreduce-fusion = true }   # ... and add (or override) flags

Flags: the key is the CLI flag without dashes (``tp`` -> ``--tp``; ``_`` and
``-`` are equivalent); ``true`` is a bare switch, ``false`` omits the flag (so a
derived configuration can switch off an inherited switch), a list gives several
values (``cuda-graph-bs = [1, 2, 4]`` -> ``--cuda-graph-bs 1 2 4``), anything
else is passed as its text. ``flags`` and ``env`` tables merge along the
``base`` chain; every other key is replaced. ``command`` (a list) replaces the
engine's launch prefix (``python -m sglang.launch_server``, ``python -m vllm.entrypoints.openai.api_server``,
``transformers serve``): the adapter still appends the model, host, port and
flags. Tests point it at a fake server script; people can point it at a wrapper.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ledger.errors import InvalidInput, NotFound
from ledger.input_files import load_toml
from schemas import normalize_flag
from schemas.events import FlagValue
from schemas.secrets import add_secret_words, holds_secret, mask_text

EngineName = Literal["sglang", "vllm", "transformers"]

#: Default wait for health (seconds): a 100B+ model loads and captures CUDA graphs for minutes.
#: (Here, not in ``server``, so the CLI's help shows it without importing httpx.)
DEFAULT_HEALTH_TIMEOUT_S = 1800.0

#: Keys a configuration may have (besides ``base``).
_KEYS = (
    "engine",
    "model",
    "flags",
    "env",
    "port",
    "host",
    "python",
    "command",
    "health_timeout_s",
    "description",
)


class ConfigError(InvalidInput):
    """The configuration file or a configuration in it is unusable (exit code 3)."""


class ServerConfig(BaseModel):
    """One resolved configuration (inheritance applied).

    ``port`` ``None`` means the engine's default port, 0 a free port picked at each start; ``health_timeout_s`` in
    seconds (``None``: the runner's default, 30 min).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    engine: EngineName = "sglang"
    model: str | None = None
    flags: dict[str, FlagValue] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)
    port: int | None = Field(default=None, ge=0, le=65535)
    host: str = "127.0.0.1"
    python: str | None = None
    command: list[str] | None = None
    health_timeout_s: float | None = Field(default=None, gt=0)
    description: str | None = None

    @field_validator("flags")
    @classmethod
    def _flags(cls, value: dict[str, FlagValue]) -> dict[str, FlagValue]:
        return {normalize_flag(k): v for k, v in value.items()}

    @field_validator("command")
    @classmethod
    def _command(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and not value:
            raise ValueError("command must name a program")
        return value

    def with_flags(self, **changes: FlagValue) -> ServerConfig:
        """A copy with flags added or changed (``None``/``False`` remove a flag from the argv).

        ``runners.plan_grid`` makes a grid's configurations with it."""
        flags = dict(self.flags)
        flags.update({normalize_flag(k): v for k, v in changes.items()})
        return self.model_copy(update={"flags": flags})


def _merge(lower: Mapping[str, Any], upper: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(lower)
    for key, value in upper.items():
        if (
            key in ("flags", "env")
            and isinstance(value, Mapping)
            and isinstance(merged.get(key), Mapping)
        ):
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value
    return merged


def _resolve(
    name: str, tables: Mapping[str, Any], source: str, seen: tuple[str, ...] = ()
) -> dict[str, Any]:
    if name in seen:
        raise ConfigError(
            f"{source}: configuration inheritance loops: {' -> '.join((*seen, name))}"
        )
    table = tables.get(name)
    if table is None:
        where = f" (base of {seen[-1]!r})" if seen else ""
        known = ", ".join(sorted(tables)) or "none"
        raise ConfigError(f"{source}: no configuration {name!r}{where}; known: {known}")
    if not isinstance(table, Mapping):
        raise ConfigError(f"{source}: [configs.{name}] must be a table")
    unknown = sorted(set(table) - set(_KEYS) - {"base"})
    if unknown:
        raise ConfigError(
            f"{source}: [configs.{name}]: unknown key(s) {', '.join(unknown)}; allowed: base, {', '.join(_KEYS)}"
        )
    own = {k: v for k, v in table.items() if k != "base"}
    base = table.get("base")
    if base is None:
        return own
    if not isinstance(base, str):
        raise ConfigError(f"{source}: [configs.{name}] base must be a configuration name")
    return _merge(_resolve(base, tables, source, (*seen, name)), own)


def relative_to(folder: Path | None, value: str | None) -> str | None:
    """``value`` (a model or tokenizer path) read relative to ``folder``, the file's own folder.

    A path written ``./x`` or ``../x``, or one that exists there, is resolved against the folder
    that holds the TOML file (a plan run from another folder found its ``servers``
    file but not its model or tokenizer); anything else (an absolute path, a hub id such as
    ``Qwen/Qwen3-8B``, a path only the working directory has) is kept as written.
    """
    if folder is None or not value or Path(value).is_absolute():
        return value
    # lexical, as the file reads (``examples/../models``): a linked folder is not followed
    candidate = os.path.abspath(folder / value)
    if value.startswith(("./", "../")) or os.path.exists(candidate):
        return candidate
    return value


def parse_configs(
    data: Mapping[str, Any], source: str = "<configs>", folder: Path | None = None
) -> dict[str, ServerConfig]:
    """Resolve every configuration of an already-parsed TOML document.

    ``folder``: the file's folder, against which a relative ``model`` path is read
    (``relative_to``).

    Raises:
        ConfigError: no ``[configs.*]``, an unknown key, a missing or looping
            ``base``, or a value of the wrong type (names the configuration and field).
    """
    tables = data.get("configs")
    if not isinstance(tables, Mapping) or not tables:
        raise ConfigError(f"{source}: no [configs.NAME] tables")
    defaults = data.get("defaults", {})
    if not isinstance(defaults, Mapping):
        raise ConfigError(f"{source}: [defaults] must be a table")
    extra = sorted(set(data) - {"configs", "defaults", "secret_words"})
    if extra:
        raise ConfigError(
            f"{source}: unknown top-level key(s) {', '.join(extra)}; allowed: defaults, configs, secret_words"
        )
    words = data.get("secret_words", [])
    if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
        raise ConfigError(f"{source}: secret_words must be a list of strings")
    try:
        add_secret_words(words)
    except ValueError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    resolved = {}
    for name in tables:
        if holds_secret(name):  # recorded as config_name and in run ids: never in clear
            raise ConfigError(
                f"{source}: [configs.{mask_text(name)}]: the name holds a secret (a token or a "
                "password) and would be recorded in clear: name it otherwise"
            )
        values = _merge(defaults, _resolve(name, tables, source))
        if isinstance(values.get("model"), str):
            values["model"] = relative_to(folder, values["model"])
        try:
            resolved[name] = ServerConfig.model_validate({**values, "name": name})
        except ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(str(p) for p in err["loc"])
            raise ConfigError(f"{source}: [configs.{name}] {field}: {err['msg']}") from None
        except ValueError as exc:  # normalize_flag on a bad flag name
            raise ConfigError(f"{source}: [configs.{name}]: {exc}") from None
    return resolved


def load_configs(path: str | Path) -> dict[str, ServerConfig]:
    """Read and resolve the configurations of a TOML file.

    Raises:
        NotFound: the file is missing (exit 5, as every missing input file).
        ConfigError: the file is not TOML, or a configuration is invalid.
    """
    file = Path(path)
    try:
        # a regular file of at most 1 MiB (/dev/zero is refused at once), nesting bounded
        data = load_toml(file, "config")
    except NotFound:
        raise NotFound(
            f"no configuration file {file} (give one with --configs; see examples/servers.toml)"
        ) from None
    except InvalidInput as exc:
        raise ConfigError(str(exc)) from None
    return parse_configs(data, str(file), file.parent)


def load_config(path: str | Path, name: str) -> ServerConfig:
    """The configuration ``name`` of the file at ``path``.

    Raises:
        ConfigError: as ``load_configs``, or no configuration of that name.
    """
    configs = load_configs(path)
    if name not in configs:
        raise ConfigError(f"{path}: no configuration {name!r}; known: {', '.join(sorted(configs))}")
    return configs[name]
