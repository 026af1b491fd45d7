"""A speculative run as its server log shows it: the settings and the accept length per window.

Both engines log the accept length of speculative decoding as they serve: SGLang on each
``Decode batch`` line (``accept len: 2.94``), vLLM on its ``SpecDecoding metrics:`` line (``Mean
acceptance length: 2.50``); both count the bonus token. The importers record them as the
``spec_decoding_trial_completed`` of the run (``run spec`` reads the same series live).
"""

from __future__ import annotations

from statistics import fmean
from typing import Any

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
