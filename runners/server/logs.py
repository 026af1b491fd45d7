"""The live server log read with its engine's grammar: one interface over the SGLang and vLLM readers.

The server runner asks the same questions of every log while a server starts, runs and stops:
did it crash (and why), did it print its ready line, what did it resolve to at startup, which
findings does it show. ``read_log(grammar, lines)`` answers them with the engine's own reader
(``ledger.engines.sglang_log`` / ``ledger.engines.vllm_log``); ``plain`` (engines whose log has
no known grammar, ``transformers serve``) knows crashes only, from their Python tracebacks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ledger.engines.sglang_log import CrashInfo, ServerLogFacts, derive_findings, parse_server_log
from ledger.engines.vllm_log import VllmLogFacts, parse_vllm_log, vllm_findings
from schemas import FindingRecorded, Host, StartupFacts

LogGrammar = Literal["sglang", "vllm", "plain"]


@dataclass(frozen=True)
class ServerLog:
    """One reading of a server log: ``crash`` (root cause, or None), ``ready`` (its ready line
    was printed), the startup facts, the warnings and the findings, in the engine's terms."""

    grammar: LogGrammar
    facts: ServerLogFacts
    vllm: VllmLogFacts | None = None

    @property
    def crash(self) -> CrashInfo | None:
        return self.facts.crash

    @property
    def ready(self) -> bool:
        return self.facts.ready

    @property
    def knows_startup(self) -> bool:
        """Whether this grammar reads startup facts at all (``plain`` does not)."""
        return self.grammar != "plain"

    @property
    def has_startup_facts(self) -> bool:
        return self.knows_startup and self.facts.has_startup_facts

    def startup(self, source: str | None = None) -> StartupFacts:
        """The startup facts the log shows (empty for ``plain``)."""
        if not self.knows_startup:
            return StartupFacts()
        facts = self.facts.to_startup_facts(source) if source else self.facts.to_startup_facts()
        if self.vllm is None:
            return facts
        return facts.model_copy(
            update={
                "max_concurrency": self.vllm.max_concurrency,
                "speculative_config": self.vllm.speculative_config,
            }
        )

    def warnings(self) -> list[str]:
        return [w.message for w in self.facts.warnings] if self.knows_startup else []

    def findings(
        self,
        *,
        host: Host | None,
        previous: StartupFacts | None,
        run_id: str,
        session_id: str | None,
        source_name: str,
    ) -> list[FindingRecorded]:
        """The findings the log supports (none for ``plain``)."""
        kw = {
            "host": host,
            "previous": previous,
            "run_id": run_id,
            "session_id": session_id,
            "source_name": source_name,
        }
        if self.grammar == "vllm" and self.vllm is not None:
            return vllm_findings(self.vllm, **kw)  # type: ignore[arg-type]
        if self.grammar == "sglang":
            return derive_findings(self.facts, **kw)  # type: ignore[arg-type]
        return []


def read_log(grammar: LogGrammar, lines: list[str]) -> ServerLog:
    """Read ``lines`` with ``grammar``'s reader."""
    if grammar == "vllm":
        parsed = parse_vllm_log(lines)
        return ServerLog(grammar, parsed.facts, parsed)
    return ServerLog(grammar, parse_server_log(lines))
