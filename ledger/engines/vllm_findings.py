"""Findings a vLLM log supports on its own: the SGLang reader's findings that apply to vLLM, a
``flag-not-in-effect`` for each requested arg a warning says was switched off or capped, and the
failure model's unclassified error lines. Every finding's engine is ``vllm``."""

from __future__ import annotations

from schemas import Evidence, FindingRecorded, Host, StartupFacts, normalize_flag

from .sglang_findings import derive_findings
from .vllm_facts import VllmLogFacts

#: The SGLang findings whose facts vLLM logs the same way.
_SHARED_KINDS = ("default-moe-config", "capacity-reduced", "warning")


def vllm_findings(
    parsed: VllmLogFacts,
    *,
    host: Host | None,
    previous: StartupFacts | None,
    run_id: str | None,
    session_id: str | None,
    source_name: str,
) -> list[FindingRecorded]:
    """The SGLang reader's findings that apply (``default-moe-config``, ``capacity-reduced``,
    the unclassified error lines) plus ``flag-not-in-effect`` for each requested arg a warning
    says was switched off, and for a CUDA graph capture size vLLM capped."""
    found = derive_findings(
        parsed.facts,
        host=host,
        previous=previous,
        run_id=run_id,
        session_id=session_id,
        source_name=source_name,
    )
    found = [f for f in found if f.kind in _SHARED_KINDS]
    for name, line in parsed.overridden.items():
        try:
            flag = normalize_flag(name)
        except ValueError:
            continue
        value = parsed.facts.server_args.get(name)
        found.append(
            FindingRecorded(
                kind="flag-not-in-effect",
                flag=flag,
                verdict="not-activated",
                basis="log",
                message=f"--{flag} {value!r} was requested, but vLLM warned: {line.message.strip()[:200]}",
                evidence=[
                    Evidence(kind="log", ref=f"{source_name}:{line.number}", text=line.raw[:300])
                ],
            )
        )
    if parsed.cuda_graph_cap is not None:
        before, cap, line = parsed.cuda_graph_cap
        found.append(
            FindingRecorded(
                kind="flag-not-in-effect",
                flag="max-cudagraph-capture-size",
                basis="log",
                message=f"CUDA graphs are captured up to batch size {cap}, not {before}: "
                f"{line.message.strip()[:200]}",
                evidence=[
                    Evidence(kind="log", ref=f"{source_name}:{line.number}", text=line.raw[:300])
                ],
            )
        )
    version = (host.engine_version if host else None) or parsed.engine_version
    common = {
        "engine": "vllm",
        "engine_version": version,
        "server_run_id": run_id,
        "session_id": session_id,
    }
    return [f.model_copy(update=common) for f in found]
