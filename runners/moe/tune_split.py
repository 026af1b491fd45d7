"""Two configs per shape (``run tune``'s default): the up/gate and the down GEMM tuned separately.

SGLang 0.5.23 loads a second file for the down GEMM when one exists
(``E=..,N=..,device_name=..[_down].json``, ``try_get_optimal_moe_config(return_down_config=True)``)
and forces its BLOCK_SIZE_M to the up config's, as both GEMMs share one token sort. So, per batch
size M: the up GEMM is searched alone (successive halving, ``_Tune._search``); the down GEMM alone
over the configs with the up winner's BLOCK_SIZE_M; the best one config for both is picked among
the two winners and the previous M's; then SGLang's default, its shipped file (with its ``_down``
file when it ships one), the one config and the pair are re-timed interleaved on the whole layer,
and the fastest is kept — the pair only where it beats one config.
"""

from __future__ import annotations

import statistics
from typing import Any

from runners.moe.space import Config, Rejected, config_key, default_config, nearest_config


def _prepare(tune: Any, M: int, configs: list[Config], gemm: str) -> int:
    """Compile and check the configs of ``gemm`` not yet measured at M; how many."""
    fresh = [
        c
        for c in configs
        if not any(k[0] == M and k[1] == config_key(c) and k[3] == gemm for k in tune.known)
    ]
    tune.measurer.prepare(M, fresh, gemm=gemm)
    return len(fresh)


def _one_config(tune: Any, M: int, candidates: list[Config]) -> Config | None:
    """The fastest of ``candidates`` with one config on both GEMMs, at the top window."""
    timed: list[tuple[float, Config]] = []
    seen: set[str] = set()
    for c in candidates:
        if config_key(c) in seen:
            continue
        seen.add(config_key(c))
        try:
            timed.append((tune._measure(M, c, tune.spec.max_budget_ms, "both"), c))
        except Rejected:
            continue
    return min(timed, key=lambda t: t[0])[1] if timed else None


def _final(tune: Any, M: int, launches: dict[str, tuple[Config, Config]]) -> dict[str, list[float]]:
    """Each launch (up config, down config) re-timed on the whole layer, round-robin, ``rounds``
    rounds at the top window; a launch that cannot run is said and left out."""
    ok: dict[str, tuple[Config, Config]] = {}
    for name, (up, down) in launches.items():
        try:
            tune.measurer.check(M, up, gemm="both", down_config=down)
        except Rejected as exc:
            tune.say(f"M={M}: {name} cannot run here ({exc})")
            continue
        ok[name] = (up, down)
    out: dict[str, list[float]] = {name: [] for name in ok}
    for _ in range(tune.spec.rounds):
        for name, (up, down) in ok.items():
            out[name].append(
                tune.measurer.time(M, up, tune.spec.max_budget_ms, gemm="both", down_config=down)
            )
    return out


def batch_split(tune: Any, M: int) -> bool:
    """Tune batch size ``M`` with a config per GEMM (module docstring); False when no config ran."""
    from runners.moe.tune import short, spread_pct

    spec, report, shape = tune.spec, tune.report, tune.shape
    t_m = tune.clock()
    measured_before = report.measured
    default = default_config(M, shape)
    refs: dict[str, Config] = {"default": default}
    if spec.seed_configs:
        refs["shipped"] = nearest_config(spec.seed_configs, M)
    up_cfgs, lo = tune._candidates(M, refs, previous=report.best)
    up_cfgs = tune._bound_prune(M, up_cfgs, refs, "up")
    prepared = _prepare(tune, M, up_cfgs, "up")
    res_up, t_up = tune._search(M, up_cfgs, lo, "up")
    if res_up.best is None:
        tune.say(f"M={M}: no config ran ({len(res_up.rejected)} rejected)")
        return False
    up = dict(res_up.best)
    bm = up["BLOCK_SIZE_M"]
    down_refs = {name: dict(c, BLOCK_SIZE_M=bm) for name, c in refs.items()}
    if spec.seed_down_configs:
        down_refs["shipped"] = dict(nearest_config(spec.seed_down_configs, M), BLOCK_SIZE_M=bm)
    down_refs["up-winner"] = dict(up)
    previous_down = {m: dict(c, BLOCK_SIZE_M=bm) for m, c in report.best_down.items()}
    d_cfgs, lo_d = tune._candidates(
        M,
        down_refs,
        kept=tune._down_kept(bm),
        previous=previous_down,
        sample=min(1.0, 2 * spec.sample),
    )
    d_cfgs = tune._bound_prune(M, d_cfgs, down_refs, "down")
    prepared += _prepare(tune, M, d_cfgs, "down")
    res_down, t_down = tune._search(M, d_cfgs, lo_d, "down")
    down = dict(res_down.best or up, BLOCK_SIZE_M=bm)
    previous_one = (
        report.results.get(str(tune.done[-1]), {}).get("one_config") if tune.done else None
    )
    one = _one_config(tune, M, [up, down, *([previous_one] if previous_one else [])]) or up
    shipped = refs.get("shipped")
    shipped_down = nearest_config(spec.seed_down_configs, M) if spec.seed_down_configs else shipped
    launches = {
        "two-config": (up, down),
        "one-config": (one, one),
        "default": (default, default),
        **({"shipped": (shipped, shipped_down or shipped)} if shipped else {}),
    }
    search_s = tune.clock() - t_m
    t = _final(tune, M, launches)
    if not t:
        return False
    med = {name: statistics.median(v) for name, v in t.items()}
    kept = min(med, key=lambda n: (med[n], n != "two-config"))
    best_up, best_down = launches[kept]
    report.best[M], report.best_down[M] = (
        dict(best_up),
        dict(best_down, BLOCK_SIZE_M=best_up["BLOCK_SIZE_M"]),
    )
    tune.done.append(M)
    d_us, t_us = med.get("default", float("nan")), med[kept]
    touched = tune.measurer.experts_touched(M)
    timings = t_up + t_down
    report.results[str(M)] = {
        "default_us": round(d_us, 2),
        "tuned_us": round(t_us, 2),
        "speedup": round(d_us / t_us, 4),
        "default_config": default,
        "tuned_config": report.best[M],
        "down_config": report.best_down[M],
        "kept": kept,
        **({"one_config_us": round(med["one-config"], 2)} if "one-config" in med else {}),
        **({"two_config_us": round(med["two-config"], 2)} if "two-config" in med else {}),
        **(
            {"two_config_gain": round(med["one-config"] / med["two-config"], 4)}
            if "one-config" in med and "two-config" in med
            else {}
        ),
        "one_config": one,
        "up_search_config": up,
        "down_search_config": down,
        "up_us": round(res_up.best_latency_us, 2) if res_up.best_latency_us else None,
        "down_us": round(res_down.best_latency_us, 2) if res_down.best_latency_us else None,
        "search_us": round(med.get("two-config", t_us), 2),
        "search_config": up,
        **(
            {"shipped_us": round(med["shipped"], 2), "shipped_config": shipped}
            if "shipped" in med
            else {}
        ),
        **({"shipped_down_config": shipped_down} if spec.seed_down_configs else {}),
        "noise_pct": round(max(spread_pct(v) for v in t.values()), 2),
        "configs_timed": len(
            {
                (k, g)
                for g, ts in (("up", t_up), ("down", t_down))
                for k, _, lat in ts
                if lat is not None
            }
        ),
        "rejected": len(res_up.rejected) + len(res_down.rejected),
        "experts_touched": touched,
        "search_s": round(search_s, 2),
        "configs_prepared": prepared,
        **tune._roof(M, touched, t_us),
    }
    vs = ", ".join(f"{n} {med[n]:.1f} µs" for n in med if n != kept)
    tune.say(
        f"M={M}: up {short(best_up)} + down {short(best_down)} ({kept}) {t_us:.1f} µs vs {vs} "
        f"({d_us / t_us:.2f}x the default); {len(timings)} timings "
        f"({report.measured - measured_before} new)"
    )
    return True
