"""One entry point for any engine's log: the facts and the run's state, by engine name.

SGLang and vLLM logs are read by their own grammars (``sglang_facts``, ``vllm_facts``); any
other engine's (``transformers serve``, an OpenAI-compatible server) by the launchers' grammar
alone (``lines``), which is enough for the failure model: tracebacks, fatal signals, device
errors and out of memory read the same in every Python server. Such a run is never ``ready``
from its log (no ready line is known): the runner's health check says so.
"""

from __future__ import annotations

from collections.abc import Iterable
from statistics import fmean
from typing import Any

from .failure import assess
from .lines import LogLine, Unwrapper
from .sglang_facts import ServerLogFacts, keep_warnings, parse_server_log
from .vllm_facts import parse_vllm_log


def read_log(engine: str, lines: Iterable[str]) -> ServerLogFacts:
    """The facts of a server log of ``engine`` (``sglang``, ``vllm``, anything else)."""
    raw = [line.rstrip("\r\n") for line in lines]
    if engine == "sglang":
        return parse_server_log(raw)
    if engine == "vllm":
        return parse_vllm_log(raw).facts
    unwrapper = Unwrapper()
    unwrapper.learn(raw)
    parsed = []
    for number, text in enumerate(raw, start=1):
        outer = unwrapper.unwrap(text)
        parsed.append(
            LogLine(number, text, outer.text.rstrip(), level=outer.level, wrapped=outer.wrapped)
        )
    facts = ServerLogFacts(line_count=len(parsed))
    # no engine prefix: each line with a level starts a record, bare lines continue it
    record: dict[int, int] = {}
    current = 0
    for line in parsed:
        if line.level is not None or current == 0:
            current = line.number
        record[line.number] = current
    facts.outcome = assess(parsed, is_ready=lambda _: False, record_of=lambda x: record[x.number])
    facts.crash = facts.outcome.failure
    keep_warnings(facts)
    return facts


#: Where each engine's server args keep the speculative decoding settings: (algorithm, steps,
#: top-k, draft tokens, draft model). vLLM keeps them in ``speculative_config`` (a dict).
_SPEC_ARGS = {
    "sglang": (
        "speculative_algorithm",
        "speculative_num_steps",
        "speculative_eagle_topk",
        "speculative_num_draft_tokens",
        "speculative_draft_model_path",
    ),
    "vllm": ("method", None, None, "num_speculative_tokens", "model"),
}


def spec_trial(
    engine: str, args: dict[str, Any], accept_lengths: list[float]
) -> dict[str, Any] | None:
    """The fields of a ``spec_decoding_trial_completed`` a log of a speculative run supports:
    the algorithm and its settings from the server args, the accept length as the mean of the
    logged series (SGLang's ``Decode batch ... accept len: X``, vLLM's ``SpecDecoding metrics:
    Mean acceptance length: X``; both count the bonus token), ``None`` without a series."""
    if not accept_lengths:
        return None
    names = _SPEC_ARGS.get(engine)
    source = args
    if engine == "vllm":
        config = args.get("speculative_config")
        source = config if isinstance(config, dict) else {}
    values: list[Any] = [source.get(n) if (names and n) else None for n in (names or (None,) * 5)]
    algorithm, steps, topk, tokens, draft = values
    return dict(
        algorithm=str(algorithm) if algorithm not in (None, "") else "unknown",
        num_steps=steps if isinstance(steps, int) else None,
        eagle_topk=topk if isinstance(topk, int) else None,
        num_draft_tokens=tokens if isinstance(tokens, int) else None,
        draft_model=draft if isinstance(draft, str) else None,
        accept_length=round(fmean(accept_lengths), 4),
        accept_length_source="decode_log" if engine == "sglang" else "spec_metrics_log",
        accept_length_series=accept_lengths[:1000],
    )
