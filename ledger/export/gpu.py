"""The decision log's GPU sections (``ledger.export.markdown``): ``## Kernel tunes`` (per tune,
SGLang's default against the tuned config at each batch size, with the roofline fractions) and
``## Speculative-decoding trials``. A session without such events gets neither section."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: ``export_markdown.markdown_table``: headers, rows, optional ``align`` -> Markdown text.
TableRenderer = Callable[..., str]


def _fmt(x: Any, spec: str = ".1f", suffix: str = "") -> str:
    return "-" if x is None else f"{x:{spec}}{suffix}"


def _pct(fraction: float | None) -> float | None:
    """A fraction as a percentage; None (no roofline: the device's peaks are unknown) stays."""
    return None if fraction is None else 100 * fraction


def render_kernel_tunes(tunes: list[dict[str, Any]], table: TableRenderer) -> list[str]:
    """``## Kernel tunes`` lines, or [] when the session has no completed tune. ``tunes``: the
    session's ``kernel_tunes`` rows, each with its ``results`` (``kernel_tune_results`` rows,
    ``ledger.read.model.SessionReport``); ``table`` is ``export_markdown.markdown_table``."""
    if not tunes:
        return []
    lines = ["## Kernel tunes", ""]
    for t in tunes:
        lines += [f"Tune `{t['tune_id']}`: {_tune_line(t)}.", ""]
        rows = t["results"]
        if rows:
            lines += [_results_table(rows, table), ""]
    return lines[:-1]


def _change(value: Any, reference: Any) -> str:
    """``value / reference - 1`` in % (the sign convention of every change: - is faster here)."""
    if value is None or not reference:
        return "-"
    return f"{100 * (value / reference - 1):+.1f}%"


def _short_config(config: Any) -> str:
    """``16/64/128 G1 w4 s4`` (BLOCK_M/N/K, GROUP_M, warps, stages), as ``run tune`` prints it."""
    import json

    c = json.loads(config) if isinstance(config, str) else config
    keys = (
        "BLOCK_SIZE_M",
        "BLOCK_SIZE_N",
        "BLOCK_SIZE_K",
        "GROUP_SIZE_M",
        "num_warps",
        "num_stages",
    )
    if not isinstance(c, dict) or any(k not in c for k in keys):
        return "-"
    return (
        f"{c['BLOCK_SIZE_M']}/{c['BLOCK_SIZE_N']}/{c['BLOCK_SIZE_K']} G{c['GROUP_SIZE_M']} "
        f"w{c['num_warps']} s{c['num_stages']}"
    )


def _results_table(rows: list[dict[str, Any]], table: TableRenderer) -> str:
    """Default, shipped and tuned side by side per batch size (the shipped column the
    tune printed was missing), the changes against both, and where the kept config came from."""
    shipped = any(r.get("shipped_us") is not None for r in rows)
    pair = any(r.get("two_config_us") is not None for r in rows)
    headers = ["M", "SGLang default µs", *(["SGLang shipped µs"] if shipped else [])]
    headers += [*(["one config µs", "two configs µs"] if pair else []), "tuned µs"]
    headers += [*(["tuned vs shipped"] if shipped else []), "tuned vs default", "noise"]
    headers += ["tuned config (kept from)", "of peak bandwidth", "of peak FLOP/s"]
    body = []
    for r in rows:
        kept = f" ({r['kept']})" if r.get("kept") else ""
        body.append(
            [
                r["batch_size"],
                _fmt(r["default_us"]),
                *([_fmt(r.get("shipped_us"))] if shipped else []),
                *([_fmt(r.get("one_config_us")), _fmt(r.get("two_config_us"))] if pair else []),
                _fmt(r["tuned_us"]),
                *([_change(r["tuned_us"], r.get("shipped_us"))] if shipped else []),
                _change(r["tuned_us"], r["default_us"]),
                _fmt(r["noise_pct"], ".1f", "%"),
                _short_config(r.get("tuned_config"))
                + (
                    f" + down {_short_config(r.get('down_config'))}"
                    if pair
                    and r.get("down_config")
                    and r.get("down_config") != r.get("tuned_config")
                    else ""
                )
                + kept,
                _fmt(
                    None if r["bandwidth_fraction"] is None else 100 * r["bandwidth_fraction"],
                    ".0f",
                    "%",
                ),
                _fmt(
                    None if r["flops_fraction"] is None else 100 * r["flops_fraction"], ".1f", "%"
                ),
            ]
        )
    align = ["r"] * (len(headers) - 3) + ["l", "r", "r"]
    return table(headers, body, align=align)


#: How the decision log names a tune's kernel (``kernel_tune_started.kernel_source``).
_KERNEL_SOURCES = {
    "sglang": "SGLang's kernel",
    "reference": "tuneledger's reference kernel (not SGLang's)",
}


def _tune_line(t: dict[str, Any]) -> str:
    """One tune in words, from the facts its events hold (a tune recorded from a log or a
    write-up may know only its kernel, shape and outcome: nothing is made up for the rest)."""
    source = _KERNEL_SOURCES.get(t["kernel_source"] or "") or (
        f"kernel `{t['kernel']}`" if t["kernel"] else "kernel not recorded"
    )
    shape = " ".join(f"{k}={t[k]}" for k in ("E", "N", "K") if t[k] is not None)
    shape += (f" top-{t['topk']}" if t["topk"] is not None else "") + (
        f" {t['dtype']}" if t["dtype"] else ""
    )
    where = f"{t['device_name']} ({t['arch']})" if t["device_name"] else t["arch"]
    parts = [
        source,
        shape.strip(),
        where,
        f"Triton {t['triton_version']}" if t["triton_version"] else None,
    ]
    head = ", ".join(p for p in parts if p)
    outcome = str(t["outcome"] or "outcome not recorded")
    if t["duration_s"] is not None:
        outcome += f" in {_fmt(t['duration_s'], '.0f')} s"
    counts = [
        f"{t['measured']} timings" if t["measured"] is not None else None,
        f"{t['reused']} reused" if t["reused"] is not None else None,
    ]
    outcome += "".join(f", {c}" for c in counts if c)
    tail = [t["search"], outcome, f"error: {t['error']}" if t["error"] else None]
    tail.append(f"file `{t['output_file']}`" if t["output_file"] else None)
    return "; ".join([head, *(p for p in tail if p)])


def render_spec_trials(rows: list[dict[str, Any]], table: TableRenderer) -> list[str]:
    """``## Speculative-decoding trials`` lines (``rows``: the session's ``spec_trials`` rows),
    or [] when the session has none."""
    if not rows:
        return []
    return [
        "## Speculative-decoding trials",
        "",
        "Changes against the baseline without speculation, value / baseline - 1 (+ means the metric went up: a shorter TPOT is negative).",
        "",
        table(
            [
                "Trial",
                "Algorithm",
                "Accept length (source)",
                "c",
                "Output throughput",
                "Median TPOT",
                "Median TTFT",
                "Runs",
                "Verdict",
            ],
            [
                [
                    r["trial_id"],
                    r["algorithm"],
                    f"{_fmt(r['accept_length'], '.2f')} ({r['accept_length_source'] or 'not reported'})",
                    r["concurrency"],
                    _fmt(r["output_throughput_change_pct"], "+.1f", "%"),
                    _fmt(r["median_tpot_change_pct"], "+.1f", "%"),
                    _fmt(r["median_ttft_change_pct"], "+.1f", "%"),
                    r["runs"],
                    r["verdict"],
                ]
                for r in rows
            ],
        ),
    ]
