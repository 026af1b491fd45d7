"""``research``: what an engine version's own source says of its flags for a target, as
``tuneledger research`` and the MCP ``research_flags`` tool ask it, once.

The order lives here: the flags given (a command line, or a servers TOML's configuration,
which also names the engine), the model's config, the target (arch, model, TP size, CUDA,
environment), the source read (``ledger.engines.research.research_spec``), a flag this version
does not define refused when ``strict``, then the board and the ledger
(``ledger.write.research.record_research_result``: the ids derived from what was researched,
so the same research again appends nothing).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledger.app.checks import Writer
from ledger.errors import InvalidInput

if TYPE_CHECKING:
    from ledger.store import LedgerStore


class NoEngine(InvalidInput):
    """Neither the request nor its servers TOML names an engine (exit 3; the CLI says it as
    the usage error it is)."""


@dataclass(frozen=True)
class ResearchRequest:
    """One research: the engine (``sglang==0.5.23``, a wheel, a folder; default: the engine of
    ``config``), the target, the flags meant to be set, what to show and what to record."""

    arch: str
    engine: str | None = None
    model_config: Path | None = None
    tp: int | None = None
    cuda: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    flags: str | None = None
    config: Path | None = None
    config_name: str | None = None
    only: tuple[str, ...] = ()
    everything: bool = False
    record: bool = False
    propose: bool = False
    download: bool = True
    use_cache: bool = True
    strict: bool = False


@dataclass(frozen=True)
class Researched:
    """The research (``ledger.engines.research.Research``) and what was recorded of it
    (``ledger.write.research.Recorded``; None when nothing was asked)."""

    result: Any
    recorded: Any = None

    @property
    def proposed(self) -> list[str]:
        return list(self.recorded.proposed) if self.recorded is not None else []


def _target(request: ResearchRequest) -> tuple[str | None, Any, Any]:
    """The engine the servers TOML names, the flags given, and the target."""
    from ledger.engines import research as lib

    config_engine, given = lib.given_flags(request.config, request.config_name, request.flags)
    model = lib.load_model_config(request.model_config) if request.model_config else None
    target = lib.Target.make(
        arch=request.arch, model=model, tp=request.tp, cuda=request.cuda, env=request.env
    )
    return config_engine, given, target


def _read(request: ResearchRequest, spec: str, given: Any, target: Any, every: bool) -> Any:
    from ledger.engines import research as lib

    return lib.research_spec(
        spec,
        target,
        given,
        only=list(request.only) or None,
        everything=every,
        download=request.download,
        use_cache=request.use_cache,
    )


def research(
    request: ResearchRequest,
    store: Callable[[], LedgerStore],
    writer: Writer,
    say: Callable[[str], None] = lambda _line: None,
) -> Researched:
    """Research ``request``; with ``record`` or ``propose``, write it by ``writer`` in
    ``store()`` (asked for only then: a research that records nothing needs no ledger).

    Raises:
        NoEngine: no engine named (exit 3).
        InvalidInput: a flag this version does not define, with ``strict``; the inputs
            (``research_spec``'s, ``given_flags``', the model config's) (exit 3).
        NotFound: the ledger, when recording (exit 5).
    """
    config_engine, given, target = _target(request)
    spec = request.engine or config_engine
    if spec is None:
        raise NoEngine("give the engine (sglang==0.5.23, a wheel, a folder)")
    say(f"reading {spec}'s source")
    result = _read(request, spec, given, target, request.everything)
    if request.strict and result.unknown_flags:
        first = result.unknown_flags[0]
        near = f" (nearest: --{first.nearest[0]})" if first.nearest else ""
        others = len(result.unknown_flags) - 1
        raise InvalidInput(
            f"--{first.spelling}: not a flag of {result.index.engine} {result.index.version}"
            f"{near}" + (f"; and {others} more" if others else "")
        )
    if not (request.record or request.propose):
        return Researched(result)
    from ledger.write.research import record_research_result

    recorded = record_research_result(
        store(),
        result,
        actor=writer.actor,
        session=writer.session_id,
        record=request.record,
        propose=request.propose,
    )
    return Researched(result, recorded)


def research_diff(request: ResearchRequest, old: str, new: str) -> Any:
    """The flags two versions disagree on for ``request``'s target: added, removed, with
    another verdict (``ledger.engines.research.diff``); every flag of both read."""
    from ledger.engines import research as lib

    _engine, given, target = _target(request)
    return lib.diff(*(_read(request, spec, given, target, True) for spec in (old, new)))
