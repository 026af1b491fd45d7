"""The fused-MoE shared-memory rule, checked on the lent H200 (device tool) with the tuner's own parts.

For each config of a grid that straddles the H200's 232,448 B per block — BLOCK_SIZE_M 16, 32
(Triton's mma.sync pipeline) and 64, 128 (Hopper's wgmma), 2 to 5 stages — it asks the tuner's
pruning (``runners.moe.space.prune`` with the device's arch, which uses
``ledger.engines.gpu_arch.moe_shared_memory``) whether the config fits, then runs it with the
tuner's own check (``runners.moe.kernels.check_config``: SGLang 0.5.23's
``invoke_fused_moe_kernel``, both expert GEMMs against torch). A config the rule keeps must run; a
config it prunes must be refused by Triton with ``OutOfResources``, and the "Required" figure
Triton reports must be the rule's count of bytes.

Usage on the GPU machine, from the repository root, with WHEELS a folder holding the sglang 0.5.23
wheel unpacked into one ``.tar.xz`` (``.so`` files and ``multimodal_gen`` left out) and the wheels
of ``../shared/gpu/fetch-sglang-kernel-wheels.sh``::

    python3 bench/h200_smem_rule.py WHEELS OUT_DIR [--kernel sglang|reference]

Writes ``OUT_DIR/h200_smem_rule.json``: the device facts and, per config, the rule's bytes, the
pruning's decision, what Triton did and its "Required" figure; and prints one line per config and
the agreement. Exit 0 when every config agrees with the rule, 1 otherwise.
"""

from __future__ import annotations

import glob
import json
import os
import re
import sys
import tarfile
import time
import zipfile

#: The configs of docs/engines.md's table first (each one measured there), then a grid around the
#: H200's limit for every BLOCK_SIZE_M the tuner's space has.
NAMED = [
    (128, 256, 128, 3),
    (128, 256, 64, 5),
    (64, 256, 128, 3),
    (128, 128, 256, 2),
    (32, 256, 256, 2),
    (32, 256, 256, 3),
    (32, 256, 256, 4),
    (32, 256, 256, 5),
]
GRID = [
    (bm, bn, bk, s)
    for bm in (16, 32, 64, 128)
    for bn, bk in ((256, 128), (128, 256))
    for s in (2, 3, 4, 5)
]


def unpack(wheels: str, site: str) -> None:
    """The wheels (and the ``.tar.xz``) of WHEELS unpacked into ``site``, once."""
    if os.path.isdir(os.path.join(site, "sglang")):
        return
    for packed in glob.glob(os.path.join(wheels, "*.tar.xz")):
        with tarfile.open(packed) as tar:
            tar.extractall(site, filter="data")
    for wheel in glob.glob(os.path.join(wheels, "*.whl")):
        zipfile.ZipFile(wheel).extractall(site)


def main() -> int:
    t0 = time.monotonic()
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    source = sys.argv[sys.argv.index("--kernel") + 1] if "--kernel" in sys.argv else "sglang"
    args = [a for a in args if a != source]
    wheels, out = args[0], args[1]
    site = os.environ.get("SGSITE", "/tmp/sgsite")
    if source == "sglang":
        unpack(wheels, site)
        sys.path.insert(0, site)
    sys.path.insert(1, os.getcwd())
    os.makedirs(out, exist_ok=True)

    from runners.moe.kernels import (
        MoeProblem,
        check_config,
        device_facts,
        load_kernel,
        make_weights,
    )
    from runners.moe.space import MoeShape, Rejected, prune, shared_memory_bytes

    facts = device_facts()
    arch, limit = facts["compute_capability"], int(facts["shared_memory_limit"])
    print(f"[{time.monotonic() - t0:5.1f}s] {facts}", flush=True)
    kernel = load_kernel(source)
    print(f"[{time.monotonic() - t0:5.1f}s] kernel {kernel.name} {kernel.version}", flush=True)
    # Small enough to build in a second, wide enough for BLOCK_SIZE_N/K 256 on both GEMMs.
    shape = MoeShape(E=8, N=512, K=2048, topk=2)
    problem = MoeProblem(shape, 64, make_weights(shape))
    rows = []
    agree = 0
    seen = set()
    for bm, bn, bk, stages in NAMED + GRID:
        if (bm, bn, bk, stages) in seen:
            continue
        seen.add((bm, bn, bk, stages))
        config = dict(
            BLOCK_SIZE_M=bm,
            BLOCK_SIZE_N=bn,
            BLOCK_SIZE_K=bk,
            GROUP_SIZE_M=1,
            num_warps=4,
            num_stages=stages,
        )
        need = shared_memory_bytes(config, 2, None, arch)
        kept, _ = prune([config], shared_memory_limit=limit, shape=shape, arch=arch)
        try:
            err = check_config(kernel, problem, config)
            ran, message, required = True, f"ran (max rel. error {err:.1e})", None
        except Rejected as exc:
            ran, message = False, str(exc)
            m = re.search(r"Required: (\d+)", message)
            required = int(m.group(1)) if m else None
        ok = (bool(kept) == ran) and (ran or required in (None, need))
        agree += ok
        rows.append(
            dict(
                config=f"{bm}/{bn}/{bk} s{stages}",
                rule_bytes=need,
                pruned=not kept,
                ran=ran,
                required=required,
                agrees=ok,
                message=message[:200],
            )
        )
        print(
            f"[{time.monotonic() - t0:5.1f}s] {bm:>3}/{bn}/{bk} s{stages}: rule {need:>7} B "
            f"{'kept  ' if kept else 'pruned'} -> {'ran' if ran else 'refused'}"
            f"{'' if required is None else f' (Required: {required})'} {'ok' if ok else 'DISAGREES'}",
            flush=True,
        )
    result = dict(facts=facts, kernel=f"{kernel.name} {kernel.version}", rows=rows, agree=agree)
    with open(os.path.join(out, "h200_smem_rule.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(f"{agree}/{len(rows)} configs agree with the rule on {arch} ({limit} B per block)")
    return 0 if agree == len(rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
