"""The MoE tuning figures of docs/campaigns.md, on the lent H200 (device tool): tune SGLang 0.5.23's fused-MoE
Triton kernel for two shapes SGLang ships H200 files for, compare with SGLang's default and shipped
configs, and measure successive halving against an exhaustive run of the pruned space.

Usage on the GPU machine, from the repository root, with the sglang wheel bundle of
``../shared/gpu/fetch-sglang-kernel-wheels.sh`` in WHEELS (pydantic and uuid6 wheels there too)::

    python3 bench/h200_moe_tune.py WHEELS OUT_DIR [deadline_s [shapes]]
    python3 bench/h200_moe_tune.py WHEELS OUT_DIR [deadline_s] --fp8    # fp8 w8a8 block [128, 128]: main_fp8

One call measures everything, in this order (each stage skipped, saying so, when the deadline —
seconds since start, default 540 — would be passed): shape B (E=512 N=160) then shape A (E=64
N=640), each tuned over M = 1..64 with SGLang's shipped H200 file as the seed and reference
(``TuneSpec.seed_configs``: the tune ends at least as fast as it), then default / shipped / tuned
re-timed interleaved (7 rounds); then exhaustive runs of shape A's pruned space at M = 1 and 64
against the halving search of the same tune (time and result); then the reference-kernel check.

WHEELS is a folder of wheels or of one ``.tar.xz`` of them unpacked (smaller to carry). Writes to
OUT_DIR (five files, as the device returns them): ``h200_moe_tune.jsonl`` (every event of the
tunes: measured configs, rejections, default-vs-tuned per batch size),
``h200_moe_exhaustive.jsonl`` (the exhaustive runs), ``h200_moe_compare.json`` (default / shipped /
tuned per batch size, halving vs exhaustive with each side's search and compile seconds, the
reference-kernel check), ``h200_moe_timings.json`` (every pruned config's time at M = 1 and 64:
the recorded timings the CPU tests replay) and ``cfgs.tgz`` (the tuned files,
``moe_configs/configs/triton_X_Y_Z/*.json``). ``bench/h200_data.py build-moe OUT_DIR`` turns them
into data/.
"""

from __future__ import annotations

import glob
import json
import os
import statistics
import sys
import time
import zipfile

T0 = 0.0


def main() -> None:
    global T0
    T0 = time.monotonic()
    fp8 = "--fp8" in sys.argv
    if fp8:
        sys.argv.remove("--fp8")
    wheels, out = sys.argv[1], sys.argv[2]
    deadline = float(sys.argv[3]) if len(sys.argv) > 3 else 540.0
    site = os.environ.get("SGSITE", "/tmp/sgsite")  # where the wheels are unpacked
    if not os.path.isdir(os.path.join(site, "sglang")):
        # WHEELS: the wheels, or one .tar.xz of them unpacked (58 MB of wheels are 36 MB so, which
        # keeps the call's working tree under the device's 64 MiB with the repository).
        packed = (
            [wheels] if wheels.endswith(".tar.xz") else glob.glob(os.path.join(wheels, "*.tar.xz"))
        )
        if packed:
            import tarfile

            with tarfile.open(packed[0]) as tar:
                tar.extractall(site, filter="data")
        for w in glob.glob(os.path.join(wheels, "*.whl")):
            zipfile.ZipFile(w).extractall(site)
    sys.path.insert(0, site)
    os.environ["PYTHONPATH"] = (
        site + os.pathsep + os.getcwd() + os.pathsep + os.environ.get("PYTHONPATH", "")
    )
    sys.path.insert(1, os.getcwd())
    os.makedirs(out, exist_ok=True)

    def log(msg: str) -> None:
        print(f"[{time.monotonic() - T0:6.1f}s] {msg}", flush=True)

    def left() -> float:
        return deadline - (time.monotonic() - T0)

    if fp8:
        main_fp8(site, out, deadline, log, left)
        return
    from runners.moe.kernels import GpuMeasurer, MoeProblem, check_config, load_kernel, make_weights  # noqa: E402
    from runners.moe.space import (  # noqa: E402
        INTERACTIVE_BATCH_SIZES,
        MoeShape,
        Rejected,
        config_key,
        default_config,
        nearest_config,
    )
    from runners.moe.tune import JsonlSink, TuneSpec, run_tune, short, spread_pct, time_interleaved  # noqa: E402

    SHIPPED = os.path.join(site, "sglang/srt/layers/moe/moe_runner/triton_utils/configs")
    # K and top-k are not in SGLang's file names: E=64,N=640 is Qwen2-57B-A14B at TP4 (hidden 3584,
    # top-8); E=512,N=160 is taken as a Qwen3-Next-style layer (hidden 2048, top-10).
    SHAPES = [
        (
            "A",
            MoeShape(E=64, N=640, K=3584, topk=8),
            "triton_3_1_0/E=64,N=640,device_name=NVIDIA_H200.json",
        ),
        (
            "B",
            MoeShape(E=512, N=160, K=2048, topk=10),
            "triton_3_7_1/E=512,N=160,device_name=NVIDIA_H200.json",
        ),
    ]
    WORKERS = max(1, min(14, (os.cpu_count() or 2) - 2))
    MIN_MS, MAX_MS = 1.2, 10.8
    # argv[4]: the shapes to run, in order (default "BA": B first, the shape the last run's tune
    # lost to the shipped config at M=1; A last, its pool is reused by the exhaustive runs).
    ONLY = sys.argv[4] if len(sys.argv) > 4 else "BA"
    SHAPE_A = SHAPES[0][1]
    SHAPES = [s for name in ONLY for s in SHAPES if s[0] == name]
    compare: dict = {
        "batch_sizes": list(INTERACTIVE_BATCH_SIZES),
        "shapes": {},
        "budget_ms": MAX_MS,
    }
    tune_sink = JsonlSink(os.path.join(out, "h200_moe_tune.jsonl"))
    exh_sink = JsonlSink(os.path.join(out, "h200_moe_exhaustive.jsonl"))

    def save() -> None:
        with open(os.path.join(out, "h200_moe_compare.json"), "w") as f:
            json.dump(compare, f, indent=1)

    log(f"workers {WORKERS}, deadline {deadline:.0f} s")
    measurers = {}
    for name, shape, shipped_rel in SHAPES:
        if left() < 60:
            log(f"shape {name}: skipped, {left():.0f} s left")
            continue
        m = GpuMeasurer("sglang", shape, workers=WORKERS)
        measurers[name] = m
        log(f"shape {name} {shape.describe()}: {m.facts}")
        shipped_all = json.load(open(os.path.join(SHIPPED, shipped_rel)))
        spec = TuneSpec(
            shape=shape,
            seed_configs=shipped_all,
            min_budget_ms=MIN_MS,
            max_budget_ms=MAX_MS,
            rounds=5,
            time_budget_s=150.0,
            output_dir=os.path.join(out, "moe_configs"),
            session_id="h200-moe-tune",
        )
        rep = run_tune(spec, m, tune_sink, say=log)
        shipped_all = json.load(open(os.path.join(SHIPPED, shipped_rel)))
        rows = {}
        for M in rep.best:
            cfgs = {
                "default": default_config(M, shape),
                "shipped": nearest_config(shipped_all, M),
                "tuned": rep.best[M],
            }
            t = time_interleaved(m, M, cfgs, rounds=7, budget_ms=MAX_MS)
            rows[str(M)] = {
                k: {
                    "median_us": round(statistics.median(v), 2),
                    "spread_pct": round(spread_pct(v), 2),
                    "all_us": [round(x, 2) for x in v],
                    "config": cfgs[k],
                }
                for k, v in t.items()
            }
            log(
                f"{name} M={M}: "
                + ", ".join(
                    f"{k} {r['median_us']} us ±{r['spread_pct']}%" for k, r in rows[str(M)].items()
                )
            )
        compare["shapes"][name] = {
            "shape": shape.describe(),
            "shipped_file": shipped_rel,
            "tune_id": rep.tune_id,
            "tune_seconds": round(rep.seconds, 1),
            "outcome": rep.outcome,
            "rows": rows,
            "results": rep.results,
            "output_file": str(rep.output_file),
        }
        save()
        if name != "A":
            m.close()  # frees 14 CPU-bound workers; shape A's pool serves the exhaustive runs

    # Successive halving against an exhaustive run of the pruned space (shape A, two batch sizes).
    mA = measurers.get("A")
    if mA is not None:
        res_a = compare["shapes"]["A"]["results"]
        exh = {}
        for M in (1, 64):
            if left() < 150 or str(M) not in res_a:
                log(
                    f"exhaustive M={M}: skipped, {left():.0f} s left, halving result: {str(M) in res_a}"
                )
                continue
            spec = TuneSpec(
                shape=SHAPE_A,
                batch_sizes=[M],
                search="exhaustive",
                max_budget_ms=MAX_MS,
                rounds=5,
                session_id="h200-moe-exhaustive",
                time_budget_s=left() - 60,
            )
            rep = run_tune(spec, mA, exh_sink, say=log)
            if M not in rep.best:
                continue
            # The search's own winner (before the final re-timing against the references).
            t = time_interleaved(
                mA,
                M,
                {"halving": res_a[str(M)]["search_config"], "exhaustive": rep.best[M]},
                rounds=7,
                budget_ms=MAX_MS,
            )
            h, e = statistics.median(t["halving"]), statistics.median(t["exhaustive"])
            exh[str(M)] = {
                "halving_us": round(h, 2),
                "exhaustive_us": round(e, 2),
                "gap_pct": round(100 * (h / e - 1), 2),
                "halving_search_s": res_a[str(M)]["search_s"],
                "exhaustive_search_s": rep.results[str(M)]["search_s"],
                "time_ratio": round(res_a[str(M)]["search_s"] / rep.results[str(M)]["search_s"], 4),
                "halving_prepare_s": res_a[str(M)]["prepare_s"],
                "exhaustive_prepare_s": rep.results[str(M)]["prepare_s"],
                "halving_configs_prepared": res_a[str(M)]["configs_prepared"],
                "exhaustive_configs_prepared": rep.results[str(M)]["configs_prepared"],
                "halving_configs_timed": res_a[str(M)]["configs_timed"],
                "exhaustive_configs_timed": rep.results[str(M)]["configs_timed"],
                "outcome": rep.outcome,
                "halving_config": res_a[str(M)]["search_config"],
                "exhaustive_config": rep.best[M],
            }
            log(f"halving vs exhaustive M={M}: {exh[str(M)]}")
            compare["halving_vs_exhaustive"] = exh
            save()
        # The recorded timings the CPU tests replay: every exhaustive measurement of shape A.
        rec: dict = {
            "shape": {"E": 64, "N": 640, "K": 3584, "topk": 8, "dtype": "bf16"},
            "facts": mA.facts,
            "budget_ms": MAX_MS,
            "latency_us": {},
            "rejected": {},
        }
        if os.path.exists(exh_sink.path):
            for line in open(exh_sink.path):
                ev = json.loads(line)
                if ev.get("type") == "kernel_config_measured":
                    k = config_key(ev["config"])
                    if ev.get("latency_us") is not None:
                        rec["latency_us"].setdefault(str(ev["batch_size"]), {})[k] = ev[
                            "latency_us"
                        ]
                    else:
                        rec["rejected"].setdefault(str(ev["batch_size"]), {})[k] = ev.get(
                            "rejected"
                        )
        with open(os.path.join(out, "h200_moe_timings.json"), "w") as f:
            json.dump(rec, f)
        mA.close()

    # tuneledger's reference kernel: checked against torch and timed beside SGLang's on shape A.
    if left() > 25:
        try:
            ref, sgl = load_kernel("reference"), load_kernel("sglang")
            shape = SHAPE_A
            w = make_weights(shape)
            from runners.moe.kernels import time_config

            rows = []
            for M in (1, 16, 64):
                p = MoeProblem(shape, M, w)
                for c in (
                    default_config(M, shape),
                    dict(
                        BLOCK_SIZE_M=16,
                        BLOCK_SIZE_N=64,
                        BLOCK_SIZE_K=128,
                        GROUP_SIZE_M=1,
                        num_warps=4,
                        num_stages=4,
                    ),
                ):
                    row = {"M": M, "config": short(c)}
                    for kname, k in (("reference", ref), ("sglang", sgl)):
                        try:
                            row[kname + "_rel_err"] = check_config(k, p, c)
                            row[kname + "_us"] = round(time_config(k, p, c, MAX_MS), 2)
                        except Rejected as exc:
                            row[kname + "_rejected"] = str(exc)
                    rows.append(row)
                    log(f"reference kernel: {row}")
            compare["reference_kernel"] = rows
        except Exception as exc:
            compare["reference_kernel_error"] = f"{type(exc).__name__}: {exc}"[:500]
            log(compare["reference_kernel_error"])
        save()
    # The device returns files at most two folders down: the tuned files travel as one archive.
    cfg_dir = os.path.join(out, "moe_configs")
    if os.path.isdir(cfg_dir):
        import shutil
        import tarfile

        with tarfile.open(os.path.join(out, "cfgs.tgz"), "w:gz") as tar:
            tar.add(cfg_dir, arcname="moe_configs")
        shutil.rmtree(cfg_dir)
    log("done")


def main_fp8(site: str, out: str, deadline: float, log, left) -> None:
    """``--fp8``: fp8 w8a8 with block quantisation [128, 128] (DeepSeek-V3 / Qwen3-FP8 style).

    SGLang 0.5.23 ships no H200 fp8 block file for E=64,N=640 (shape A): it has
    ``triton_3_2_0/E=128,N=768,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128, 128].json``,
    Qwen3-30B-A3B-FP8 at TP1 (128 experts, moe_intermediate 768, hidden 2048, top-8, its
    checkpoint's ``weight_block_size`` [128, 128]). Shape Q (that one) is tuned first at M = 1, 8,
    64, seeded with the shipped file, and default / shipped / tuned re-timed interleaved; then
    shape A in fp8, seeded with SGLang's fp8 default only (default / tuned re-timed), if time is
    left. Writes ``h200_moe_fp8_tune.jsonl``, ``h200_moe_fp8_compare.json`` and
    ``fp8_cfgs.tgz`` under OUT; ``bench/h200_data.py build-moe-fp8 OUT`` adds them to data/.
    """
    from pathlib import Path

    from runners.moe.kernels import FP8_TOLERANCE, GpuMeasurer
    from runners.moe.space import MoeShape, default_config, nearest_config
    from runners.moe.tune import JsonlSink, TuneSpec, run_tune, spread_pct, time_interleaved

    shipped_dir = os.path.join(site, "sglang/srt/layers/moe/moe_runner/triton_utils/configs")
    block = (128, 128)
    shapes = [
        (
            "Q",
            MoeShape(E=128, N=768, K=2048, topk=8, dtype="fp8_w8a8", block_shape=block),
            "triton_3_2_0/E=128,N=768,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128, 128].json",
        ),
        ("A", MoeShape(E=64, N=640, K=3584, topk=8, dtype="fp8_w8a8", block_shape=block), None),
    ]
    workers = max(1, min(14, (os.cpu_count() or 2) - 2))
    min_ms, max_ms = 1.2, 10.8
    sizes = [1, 8, 64]
    compare: dict = {
        "dtype": "fp8_w8a8",
        "block_shape": list(block),
        "batch_sizes": sizes,
        "tolerance": FP8_TOLERANCE,
        "budget_ms": max_ms,
        "shapes": {},
    }
    sink = JsonlSink(os.path.join(out, "h200_moe_fp8_tune.jsonl"))

    def save() -> None:
        with open(os.path.join(out, "h200_moe_fp8_compare.json"), "w") as f:
            json.dump(compare, f, indent=1)

    log(f"fp8 w8a8 block {list(block)}: workers {workers}, deadline {deadline:.0f} s")
    for name, shape, shipped_rel in shapes:
        # A shape needs its pool's start (~20 s), a tune and the re-timing.
        if left() < (90 if name == "Q" else 75):
            log(f"fp8 shape {name}: skipped, {left():.0f} s left")
            compare["shapes"][name] = {"shape": shape.describe(), "skipped": f"{left():.0f} s left"}
            save()
            continue
        shipped_all = None
        if shipped_rel and os.path.exists(os.path.join(shipped_dir, shipped_rel)):
            shipped_all = json.load(open(os.path.join(shipped_dir, shipped_rel)))
        try:
            m = GpuMeasurer("sglang", shape, workers=workers)
        except Exception as exc:
            compare["shapes"][name] = {
                "shape": shape.describe(),
                "error": f"{type(exc).__name__}: {exc}"[:500],
            }
            log(f"fp8 shape {name}: {compare['shapes'][name]['error']}")
            save()
            continue
        log(f"fp8 shape {name} {shape.describe()}: {m.facts}")
        reserve = 15.0  # the re-timing: 3 batch sizes x 3 configs x 7 rounds at 10.8 ms
        spec = TuneSpec(
            shape=shape,
            batch_sizes=sizes,
            seed_configs=shipped_all or {},
            min_budget_ms=min_ms,
            max_budget_ms=max_ms,
            rounds=5,
            time_budget_s=max(20.0, min(90.0, left() - reserve - (80 if name == "Q" else 0))),
            output_dir=Path(out) / "moe_configs_fp8",
            session_id="h200-moe-tune-fp8",
        )  # the roofline: the device's fp8 peaks (runners/moe/peaks.py)
        try:
            rep = run_tune(spec, m, sink, say=log)
        except Exception as exc:
            compare["shapes"][name] = {
                "shape": shape.describe(),
                "error": f"{type(exc).__name__}: {exc}"[:500],
            }
            log(f"fp8 shape {name}: {compare['shapes'][name]['error']}")
            save()
            m.close()
            continue
        rows = {}
        for M in rep.best:
            cfgs = {"default": default_config(M, shape), "tuned": rep.best[M]}
            if shipped_all:
                cfgs["shipped"] = nearest_config(shipped_all, M)
            try:
                t = time_interleaved(m, M, cfgs, rounds=7, budget_ms=max_ms)
            except Exception as exc:  # a reference config that cannot launch here: said, not fatal
                log(f"fp8 {name} M={M}: re-timing failed: {type(exc).__name__}: {exc}"[:400])
                continue
            rows[str(M)] = {
                k: {
                    "median_us": round(statistics.median(v), 2),
                    "spread_pct": round(spread_pct(v), 2),
                    "all_us": [round(x, 2) for x in v],
                    "config": cfgs[k],
                }
                for k, v in t.items()
            }
            log(
                f"fp8 {name} M={M}: "
                + ", ".join(
                    f"{k} {r['median_us']} us ±{r['spread_pct']}%" for k, r in rows[str(M)].items()
                )
            )
        compare["shapes"][name] = {
            "shape": shape.describe(),
            "shipped_file": shipped_rel if shipped_all else None,
            "tune_id": rep.tune_id,
            "tune_seconds": round(rep.seconds, 1),
            "outcome": rep.outcome,
            "rows": rows,
            "results": rep.results,
            "output_file": str(rep.output_file),
        }
        save()
        m.close()
    cfg_dir = os.path.join(out, "moe_configs_fp8")
    if os.path.isdir(cfg_dir):
        import shutil
        import tarfile

        with tarfile.open(os.path.join(out, "fp8_cfgs.tgz"), "w:gz") as tar:
            tar.add(cfg_dir, arcname="moe_configs_fp8")
        shutil.rmtree(cfg_dir)
    save()
    log("done")


if __name__ == "__main__":
    main()
