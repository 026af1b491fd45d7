"""Findings an SGLang log supports on its own (``basis="log"``), from ``ServerLogFacts``.

Tuning knowledge lives here (which flags switch what off, which features crash where); the
facts come from ``sglang_facts``, the run's failure from ``failure``. Never raises.
"""

from __future__ import annotations

from typing import Any

from schemas import Evidence, FindingRecorded, Host, StartupFacts

from .gpu_arch import compute_capability_for, is_sm90_or_sm10x
from .lines import LogLine
from .sglang_facts import ServerLogFacts
from .sglang_lines import version_tuple

#: Server args that switch piecewise CUDA graph off as a side effect (docs/engines.md).
_PIECEWISE_DISABLERS: tuple[tuple[str, Any], ...] = (
    ("enable_flashinfer_allreduce_fusion", True),
    ("enable_torch_compile", True),
    ("enable_dp_attention", True),
    ("enable_deterministic_inference", True),
)


def _ref(source_name: str, line: LogLine) -> str:
    return f"{source_name}:{line.number}"


def _evidence(source_name: str, line: LogLine | None, text: str | None = None) -> list[Evidence]:
    if line is None:
        return []
    shown = (
        text if text is not None else (line.raw if len(line.raw) <= 300 else line.raw[:297] + "...")
    )
    return [Evidence(kind="log", ref=_ref(source_name, line), text=shown)]


def _arg_evidence(facts: ServerLogFacts, source_name: str, name: str) -> list[Evidence]:
    """Evidence for one server arg: its ``name=value`` on the (long) server_args line."""
    line = facts.evidence.get("server_args")
    return _evidence(source_name, line, f"{name}={facts.server_args.get(name)!r}") if line else []


def resolve_arch(facts: ServerLogFacts, host: Host | None) -> tuple[str | None, str | None]:
    """(compute capability, GPU name) from the given host first, else from the log's MoE config path."""
    gpu = (host.gpu_name if host else None) or facts.gpu_name
    arch = (host.compute_capability if host else None) or compute_capability_for(gpu)
    return arch, gpu


def derive_findings(
    facts: ServerLogFacts,
    *,
    host: Host | None = None,
    previous: StartupFacts | None = None,
    run_id: str | None = None,
    session_id: str | None = None,
    source_name: str = "server.log",
) -> list[FindingRecorded]:
    """Findings the log supports on its own (``basis="log"``), each with its log lines as evidence.

    Kinds: ``crash`` with verdict ``incompatible`` (a feature the args turned on is
    where the crash happened: see ``CRASH_CULPRITS``), ``flag-not-in-effect``
    (flashinfer allreduce fusion asked for, in either spelling, but not on an
    SM90/SM10X multi-GPU setup or disabled at run time; a requested setting a later
    line overrode), ``piecewise-cuda-graph-off`` (only where that version has it on
    by default, with its evidence), ``default-moe-config`` (one per missing file),
    ``decode-without-cuda-graph`` (decode batches larger than the largest captured
    batch size ran eager), ``warning`` (error lines the failure model could not classify)
    and ``capacity-reduced`` (against ``previous``, the startup
    facts of the run compared with). One finding per fact, however many ranks
    printed it. Evidence refs are ``source_name:line``. Never raises.
    """
    engine_version = host.engine_version if host else None
    common = dict(
        basis="log",
        server_run_id=run_id,
        session_id=session_id,
        engine="sglang",
        engine_version=engine_version,
    )
    found: list[FindingRecorded] = []
    crashed = _crash_culprits(facts, host, source_name)
    found += crashed
    if not any(f.flag in _FUSION_FLAGS for f in crashed):
        found += _flashinfer_fusion(facts, host, source_name)
    found += _piecewise(facts, engine_version, source_name)
    found += _default_moe(facts, source_name)
    found += _decode_eager(facts, source_name)
    found += _capacity(facts, previous, source_name)
    found += _overridden(facts, source_name)
    found += _unclassified(facts, source_name)
    unique: dict[tuple[str, str | None, str], FindingRecorded] = {}
    for f in found:
        unique.setdefault((f.kind, f.flag, f.message), f)
    return [f.model_copy(update=common) for f in unique.values()]


_FUSION_FLAGS = ("enable-flashinfer-allreduce-fusion", "flashinfer-allreduce-fusion-backend")


def fusion_requested(args: dict[str, Any]) -> tuple[str, Any] | None:
    """The server arg that turns flashinfer allreduce fusion on, in the log's own spelling
    (``FLAG_NAMES``): ``("enable_flashinfer_allreduce_fusion", True)`` up to 0.5.14,
    ``("flashinfer_allreduce_fusion_backend", 'auto')`` in 0.5.23; ``None`` when off or
    ``enforce_disable_flashinfer_allreduce_fusion`` is set."""
    if args.get("enforce_disable_flashinfer_allreduce_fusion") is True:
        return None
    backend = args.get("flashinfer_allreduce_fusion_backend")
    if isinstance(backend, str) and backend.lower() not in ("none", "", "disabled"):
        return "flashinfer_allreduce_fusion_backend", backend
    if args.get("enable_flashinfer_allreduce_fusion") is True:
        return "enable_flashinfer_allreduce_fusion", True
    return None


def _flashinfer_fusion(facts: ServerLogFacts, host: Host | None, src: str) -> list[FindingRecorded]:
    requested = fusion_requested(facts.server_args)
    if requested is None:
        return []
    name, value = requested
    flag = name.replace("_", "-")
    shown = f"--{flag}" if value is True else f"--{flag} {value}"
    evidence = _arg_evidence(facts, src, name)
    if facts.flashinfer_fusion_disabled is not None:
        return [
            FindingRecorded(
                kind="flag-not-in-effect",
                flag=flag,
                verdict="not-activated",
                message=f"{shown} is set, but SGLang logged "
                "'Disabling flashinfer allreduce fusion permanently.' (its workspace failed); server_args still say it is on",
                evidence=evidence + _evidence(src, facts.flashinfer_fusion_disabled),
            )
        ]
    arch, gpu = resolve_arch(facts, host)
    if arch is not None and not is_sm90_or_sm10x(arch):
        moe_line = (
            facts.moe_configs[0].line
            if facts.moe_configs and not (host and host.gpu_name)
            else None
        )
        return [
            FindingRecorded(
                kind="flag-not-in-effect",
                flag=flag,
                verdict="not-activated",
                message=f"{shown} has no effect on {arch} ({gpu or 'this GPU'}): "
                "SGLang's flashinfer allreduce fusion runs only on SM90 or SM10X",
                evidence=evidence + _evidence(src, moe_line),
            )
        ]
    if facts.server_args.get("tp_size") == 1:
        return [
            FindingRecorded(
                kind="flag-not-in-effect",
                flag=flag,
                verdict="not-activated",
                message=f"{shown} has no effect with tp_size=1 (no all-reduce to fuse)",
                evidence=evidence + _arg_evidence(facts, src, "tp_size"),
            )
        ]
    return []


#: Features that crash the server where they run: (what turns it on, words of the traceback
#: that put the crash inside it). A crash with such words while the feature is on makes the
#: feature ``incompatible`` on that arch (not ``not-activated``: it was active, and it crashed).
#: Sources: sgl-project/sglang#15650 (flashinfer TRT allreduce fusion JIT on SM120),
#: #24633 (trtllm_mla prefill, TllmGenFmhaRunner), #12178 (fa3 asserts SM80-90).
CRASH_CULPRITS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "flashinfer allreduce fusion",
        (
            "flashinfer/jit/comm.py",
            "gen_trtllm_comm_module",
            "flashinfer_comm_fusion",
            "trtllm_allreduce",
            "allreduce_fusion",
        ),
    ),
    (
        "attention backend",
        (
            "_backend.py",
            "TllmGenFmhaRunner",
            "FlashAttention v3 Backend requires",
            "attention_registry.py",
        ),
    ),
)


def _crash_culprits(facts: ServerLogFacts, host: Host | None, src: str) -> list[FindingRecorded]:
    crash = facts.crash
    if crash is None:
        return []
    text = "\n".join([*crash.traceback, *crash.tail, crash.message])
    arch, gpu = resolve_arch(facts, host)
    where = f" on {arch} ({gpu})" if arch and gpu else (f" on {arch}" if arch else "")
    out = []
    fusion = fusion_requested(facts.server_args)
    if fusion is not None and any(w in text for w in CRASH_CULPRITS[0][1]):
        name, value = fusion
        flag = name.replace("_", "-")
        shown = f"--{flag}" if value is True else f"--{flag} {value}"
        out.append(
            FindingRecorded(
                kind="crash",
                flag=flag,
                value=None if value is True else str(value),
                verdict="incompatible",
                message=f"{shown} crashed the server{where}: it was active and its kernel failed ({crash.message})",
                evidence=_arg_evidence(facts, src, name) + _evidence(src, crash.line),
            )
        )
    backend = facts.attention_backend
    if backend and any(w in text for w in CRASH_CULPRITS[1][1]) and _names_backend(text, backend):
        out.append(
            FindingRecorded(
                kind="crash",
                flag="attention-backend",
                value=backend,
                verdict="incompatible",
                message=f"attention backend {backend} crashed the server{where} ({crash.message})",
                evidence=_evidence(src, facts.evidence.get("attention_backend"))
                + _evidence(src, crash.line),
            )
        )
    return out


def _names_backend(text: str, backend: str) -> bool:
    """Whether a traceback points at ``backend``'s own code (``trtllm_mla_backend.py``, TRT-LLM's
    FMHA runner for a ``trtllm*`` backend, FlashAttention v3's assertion for ``fa3``)."""
    lowered = text.lower()
    if f"{backend.lower()}_backend.py" in lowered:
        return True
    if backend.startswith("trtllm") and "tllmgenfmharunner" in lowered:
        return True
    return backend == "fa3" and "flashattention v3 backend requires" in lowered


def _piecewise(
    facts: ServerLogFacts, engine_version: str | None, src: str
) -> list[FindingRecorded]:
    """Piecewise CUDA graph off, only where this version has it on by default (or the args asked
    for it) and only with evidence: the line that disabled it, the arg, or the decode capture
    that ended without a piecewise capture."""
    if facts.piecewise_cuda_graph is not False:
        return []
    args = facts.server_args
    if not (
        piecewise_on_by_default(facts, engine_version)
        or args.get("enable_piecewise_cuda_graph") is True
    ):
        return []
    name = "prefill CUDA graph" if facts.phase_graphs else "piecewise CUDA graph"
    parts = [f"{name} is off (the decode CUDA graph capture ended without a {name} capture)"]
    evidence: list[Evidence] = []
    if facts.piecewise_disabled_reason and "piecewise_cuda_graph" in facts.evidence:
        parts = [f"{name} is off: {facts.piecewise_disabled_reason}"]
        evidence += _evidence(src, facts.evidence["piecewise_cuda_graph"])
    if args.get("disable_piecewise_cuda_graph") is True:
        parts = [f"{name} is off: server_args has disable_piecewise_cuda_graph=True"]
        evidence += _arg_evidence(facts, src, "disable_piecewise_cuda_graph")
    disablers = [name for name, value in _PIECEWISE_DISABLERS if args.get(name) is value]
    pp = args.get("pp_size")
    if isinstance(pp, int) and not isinstance(pp, bool) and pp > 1:
        disablers.append("pp_size>1")
    if disablers:
        parts.append(f"while {', '.join(disablers)} is on (it switches piecewise CUDA graph off)")
        for arg in disablers:
            if arg in args:
                evidence += _arg_evidence(facts, src, arg)
    if not evidence:
        evidence += _evidence(src, facts.evidence.get("cuda_graph_end"))
    if not evidence:
        return []
    return [
        FindingRecorded(kind="piecewise-cuda-graph-off", message=" ".join(parts), evidence=evidence)
    ]


def _default_moe(facts: ServerLogFacts, src: str) -> list[FindingRecorded]:
    """One finding per missing file while the run uses SGLang's default config. A fallback to
    another Triton version's file is a tuned config (no finding); a missing ``_down`` file is
    optional (SGLang reuses the up projection's config): named only when the run's own config is
    the default too."""
    if facts.moe_kernel_config != "default":
        return []
    out = []
    for moe in facts.moe_configs:
        if moe.status == "default":
            name = moe.path.rsplit("/", 1)[-1]
            out.append(
                FindingRecorded(
                    kind="default-moe-config",
                    message=f"default fused-MoE kernel config in use: no tuned file {name}",
                    evidence=_evidence(src, moe.line),
                )
            )
    return out


def _unclassified(facts: ServerLogFacts, src: str) -> list[FindingRecorded]:
    """Error-level lines no rule of the failure model knows: said, never a silent ``ready``."""
    return unclassified_finding(facts.outcome.unclassified, src)


def unclassified_finding(lines: list[LogLine], src: str) -> list[FindingRecorded]:
    """``N unclassified error lines``, quoting the first, with up to three lines as evidence."""
    if not lines:
        return []
    first = lines[0].message.strip()
    quoted = first if len(first) <= 200 else first[:197] + "..."
    evidence: list[Evidence] = []
    for line in lines[:3]:
        evidence += _evidence(src, line)
    n = len(lines)
    return [
        FindingRecorded(
            kind="warning",
            message=f"{n} unclassified error line{'s' if n != 1 else ''}: the reader does not know "
            f"whether {'they' if n != 1 else 'it'} stopped the server; the first: {quoted!r}",
            evidence=evidence,
        )
    ]


def _decode_eager(facts: ServerLogFacts, src: str) -> list[FindingRecorded]:
    if not facts.cuda_graph_bs:
        return []
    largest = max(facts.cuda_graph_bs)
    eager = facts.eager_decodes.above(largest)
    if eager is None:
        return []
    evidence = _evidence(src, facts.evidence.get("cuda_graph_bs"))
    for line in eager.lines:
        evidence += _evidence(src, line)
    return [
        FindingRecorded(
            kind="decode-without-cuda-graph",
            message=f"{eager.count} decode batch line(s) ran without CUDA graph at #running-req up to {eager.peak}, "
            f"above the largest captured batch size {largest} (see {facts.cuda_graph_max_bs_flag})",
            evidence=evidence,
        )
    ]


def _capacity(
    facts: ServerLogFacts, previous: StartupFacts | None, src: str
) -> list[FindingRecorded]:
    if previous is None:
        return []
    out = []
    for name in ("max_running_requests", "max_total_num_tokens"):
        before, now = getattr(previous, name), getattr(facts, name)
        if before is not None and now is not None and 0 < now < before:
            out.append(
                FindingRecorded(
                    kind="capacity-reduced",
                    message=f"{name} {before} -> {now} ({(now - before) / before:+.0%}) against the previous run",
                    evidence=_evidence(src, facts.evidence.get(name)),
                )
            )
    return out


def _overridden(facts: ServerLogFacts, src: str) -> list[FindingRecorded]:
    """A setting the args asked for that a later line overrode: flag-not-in-effect naming the line
    (no verdict: the setting works elsewhere; this run did not have it)."""
    out = []
    for o in facts.overrides:
        if o.implied:
            continue
        requested = facts.server_args.get(o.flag.replace("-", "_")) if o.flag else None
        if not o.flag:
            continue  # a line that names no setting of the args is a warning, not a finding
        what = f"--{o.flag}"
        asked = f" (requested {requested!r})" if requested is not None else ""
        now = f" is {o.effective!r} in effect" if o.effective is not None else " is not in effect"
        out.append(
            FindingRecorded(
                kind="flag-not-in-effect",
                flag=o.flag,
                message=f"{what}{asked}{now}: {o.reason or 'overridden at startup'}",
                evidence=_arg_evidence(facts, src, o.flag.replace("-", "_"))
                + _evidence(src, o.line)
                if o.flag and o.flag.replace("-", "_") in facts.server_args
                else _evidence(src, o.line),
            )
        )
    return out


#: First SGLang release with piecewise CUDA graph on by default (sgl-project/sglang PR #16331,
#: merged 2026-01-03, replaced --enable-piecewise-cuda-graph by --disable-piecewise-cuda-graph).
PIECEWISE_DEFAULT_ON_SINCE = (0, 5, 8)


def piecewise_on_by_default(
    facts: ServerLogFacts, engine_version: str | None = None
) -> bool | None:
    """Whether this log's SGLang version captures piecewise (prefill) CUDA graphs unless told not to.

    Read from the server args' own names first (``FLAG_NAMES``): ``disable_piecewise_cuda_graph``
    or ``cuda_graph_backend_prefill`` (or 0.5.23's per-phase capture lines) mean on by default;
    only ``enable_piecewise_cuda_graph`` means opt-in. Else from ``engine_version`` against
    ``PIECEWISE_DEFAULT_ON_SINCE``; ``None`` when neither tells.
    """
    args = facts.server_args
    if (
        "disable_piecewise_cuda_graph" in args
        or "cuda_graph_backend_prefill" in args
        or facts.phase_graphs
    ):
        return True
    if "enable_piecewise_cuda_graph" in args:
        return False
    version = version_tuple(engine_version)
    return None if version is None else version >= PIECEWISE_DEFAULT_ON_SINCE
