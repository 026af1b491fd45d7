"""The comparison rule in words: one wording for every place that states it (docs/comparison.md).

``benchmark_deltas.verdict_rule``, the decision log's Verdicts section and ``run plan``'s
footnote under its verdict table said it three ways; one of them was still the earlier rule's
(a noise threshold of 2 x the baseline's CV, too-noisy above 25%). They all read these.
"""

from __future__ import annotations

from schemas.student_t import MAX_PRACTICAL_RUNS

#: How a ``comparison_completed`` written under the earlier rule names its threshold
#: (``noise_source``: "2 x A-vs-A CV = 49.90% (floor 2%); ..."): its verdict is not this rule's,
#: so ``benchmark_deltas`` judges its arms again by this rule where its own judgment pairs the
#: same baseline over as many runs (data/vllm_cpu_campaign.jsonl's), else labels it.
EARLIER_RULE_SOURCE = "2 x A-vs-A CV%"

#: Where tau comes from, said by the places that have no option of their own to name.
TAU_SOURCE = "the plan's --threshold or [plan] threshold, else the metric's default: 5%, 10% for p99 latencies"


def verdict_rule(*, stored: bool = True, earlier: bool = False) -> str:
    """``benchmark_deltas.verdict_rule``: ``stored`` a comparison event's verdict, else the view's
    own (no current comparison covers the arm: the metric's default threshold); ``earlier`` a
    stored verdict of the earlier rule that the view could not judge again over the same runs."""
    if earlier:
        return (
            "statistical, earlier rule: Welch 95% CI of the log ratio against tau = 2 x the "
            "baseline's CV (recorded before the practical threshold)"
        )
    against = (
        "tau, the comparison's practical threshold"
        if stored
        else "the metric's default practical threshold (no current comparison event)"
    )
    where = "statistical" if stored else "statistical, here"
    return f"{where}: Welch 95% CI of the log ratio against {against}"


def verdict_words(tau_source: str = TAU_SOURCE) -> str:
    """What tau is and what each verdict means under the rule (the decision log, the plan's
    footnote); ``tau_source``: where that place's tau comes from."""
    return (
        f"tau: the practical threshold ({tau_source}); improved / regressed: the whole 95% CI "
        "of the change beyond +-tau; no-measurable-change: the whole CI inside +-tau; "
        "inconclusive: neither, with the runs per arm that would decide; too-noisy: neither the "
        f"change nor no change would be decided within {MAX_PRACTICAL_RUNS} runs per arm at "
        "this spread (docs/comparison.md)"
    )
