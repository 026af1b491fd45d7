"""Two configs per shape on the lent H200 (device tool): ``run tune``'s default — the up/gate and
the down GEMM of SGLang 0.5.23's fused-MoE kernel tuned separately — over SGLang's 18 batch sizes,
for the shapes given, each within what is left of one call.

Usage on the GPU machine, from the repository root (the packed site of docs/campaigns.md in
PACKED: ``*.tar.xz`` of the unpacked wheels and of the stripped sglang tree)::

    python3 bench/h200_moe_pair.py PACKED OUT_DIR DEADLINE_S SHAPE [SHAPE ...]

SHAPE is ``name:E,N,K,topk[:fp8][:interactive][:capS]`` (``q:256,256,3072,8:cap240``: at most
240 s for that shape; all 18 batch sizes unless ``interactive``; ``exh``: an exhaustive search of
the pruned space at M = 1 and 64, the gap the halving search leaves). Each shape is
tuned as ``tuneledger run tune -E .. -N .. -K .. --topk .. [--dtype fp8_w8a8 --block-shape
128,128] --all-batch-sizes --workers 14`` does (``runners.moe.request.prepare``: SGLang's shipped
H200 files, the ``_down`` one too, seed and reference it), with a time budget of what is left
minus a margin. Writes to OUT_DIR: ``<name>.jsonl`` (every event of the tune, the
``moe_config_recorded`` of its files included), ``summary.json`` (seconds and the per-M results
of each shape) and ``cfgs.tgz`` (the files written). ``bench/h200_data.py build-pair OUT_DIR``
adds them to data/.
"""

from __future__ import annotations

import glob
import json
import os
import sys
import tarfile
import time

T0 = time.monotonic()


def log(msg: str) -> None:
    print(f"[{time.monotonic() - T0:6.1f}s] {msg}", flush=True)


def unpack(packed: str, site: str) -> None:
    """The packed site into ``site`` once (files under /tmp survive while the machine is held)."""
    if os.path.isdir(os.path.join(site, "sglang")) and os.path.isdir(os.path.join(site, "duckdb")):
        return
    for path in sorted(glob.glob(os.path.join(packed, "*.tar.xz"))):
        with tarfile.open(path) as tar:
            tar.extractall(site, filter="data")


def main() -> None:
    packed, out, deadline = sys.argv[1], sys.argv[2], float(sys.argv[3])
    site = os.environ.get("SGSITE", "/tmp/sgsite")
    unpack(packed, site)
    code = os.environ.get("TUNE_CODE", os.getcwd())
    sys.path[:0] = [code, site]
    os.environ["PYTHONPATH"] = os.pathsep.join([code, site, os.environ.get("PYTHONPATH", "")])
    os.makedirs(out, exist_ok=True)
    log(f"unpacked; code from {code}")
    from runners.moe.request import TuneRequest, prepare
    from runners.moe.tune import JsonlSink, run_tune

    summary: dict = {"shapes": {}}
    cfg_root = os.path.join(out, "cfgs")
    for arg in sys.argv[4:]:
        name, dims, *opts = arg.split(":")
        E, N, K, topk = (int(x) for x in dims.split(","))
        fp8 = "fp8" in opts
        left = deadline - (time.monotonic() - T0)
        if left < 90:
            log(f"{name}: skipped, {left:.0f} s left")
            summary["shapes"][name] = {"skipped": f"{left:.0f} s left"}
            continue
        req = TuneRequest(
            experts=E,
            inter=N,
            hidden=K,
            topk=topk,
            dtype="fp8_w8a8" if fp8 else "bf16",
            block_shape=(128, 128) if fp8 else None,
            all_batch_sizes="interactive" not in opts and "exh" not in opts,
            # exh: the gap to an exhaustive search, at M = 1 and 64
            batch_sizes=[1, 64] if "exh" in opts else None,
            search="exhaustive" if "exh" in opts else "halving",
            workers=max(1, min(14, (os.cpu_count() or 2) - 2)),
            output_dir=__import__("pathlib").Path(cfg_root),
            session_id="h200-moe-pair",
            time_budget_s=min([left - 60, *(float(o[3:]) for o in opts if o.startswith("cap"))]),
        )
        t0 = time.monotonic()
        spec, measurer = prepare(req, __import__("pathlib").Path(out) / "unused", say=log)
        start_s = time.monotonic() - t0
        try:
            rep = run_tune(spec, measurer, JsonlSink(os.path.join(out, f"{name}.jsonl")), say=log)
        finally:
            measurer.close()
        summary["shapes"][name] = {
            "shape": spec.shape.describe(),
            "start_s": round(start_s, 1),
            "tune_s": round(rep.seconds, 1),
            "outcome": rep.outcome,
            "measured": rep.measured,
            "rejected": rep.rejected,
            "bound_pruned": rep.bound_pruned,
            "early_stopped": rep.early_stopped,
            "files": [p.name for p in (rep.output_file, rep.down_file) if p is not None],
            "shipped_seed": bool(spec.seed_configs),
            "shipped_down_seed": bool(spec.seed_down_configs),
            "results": rep.results,
        }
        with open(os.path.join(out, "summary.json"), "w") as f:
            json.dump(summary, f, indent=1)
        log(f"{name}: {rep.summary}")
    with tarfile.open(os.path.join(out, "cfgs.tgz"), "w:gz") as tar:
        if os.path.isdir(cfg_root):
            tar.add(cfg_root, arcname="cfgs")


if __name__ == "__main__":
    main()
