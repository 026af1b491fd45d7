"""fp8 w8a8 block quantisation in ``run tune``: what runs on the CPU — the
shape and file name, the space restriction SGLang's kernel needs, the shared-memory figures, the
refusals, and the quantisation in torch (skipped, saying so, where torch is absent). The kernel
itself is checked on the H200 (bench/h200_moe_tune.py --fp8: every config against the
dequantised torch reference before it is timed)."""

from __future__ import annotations

import json

import pytest

from ledger.cli.main import main
from runners.moe.space import (
    MoeShape,
    block_shape_fits,
    config_file_name,
    default_config,
    kernel_refusal,
    prune,
    search_space,
    shape_from_model_config,
    shared_memory_bytes,
)

FP8 = MoeShape(E=128, N=768, K=2048, topk=8, dtype="fp8_w8a8", block_shape=(128, 128))
H200_SMEM = 232_448


def _c(m, n, k, s=3, w=4, g=1):
    return dict(
        BLOCK_SIZE_M=m, BLOCK_SIZE_N=n, BLOCK_SIZE_K=k, GROUP_SIZE_M=g, num_warps=w, num_stages=s
    )


def test_fp8_file_name_carries_dtype_and_block_shape():
    assert config_file_name(FP8, "NVIDIA H200") == (
        "E=128,N=768,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128, 128].json"
    )
    assert FP8.describe() == "E=128 N=768 K=2048 top-8 fp8_w8a8 block [128, 128]"


def test_model_config_with_weight_block_size_is_fp8_block():
    cfg = {
        "num_experts": 128,
        "moe_intermediate_size": 768,
        "hidden_size": 2048,
        "num_experts_per_tok": 8,
        "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]},
    }
    assert shape_from_model_config(cfg) == FP8


def test_block_quant_space_keeps_tiles_inside_one_group():
    # BLOCK_K must divide block_k: one scale per K step (SGLang: offs_ks = k_start // group_k)
    assert block_shape_fits(_c(16, 64, 128), (128, 128)) is None
    assert block_shape_fits(_c(16, 64, 64), (128, 128)) is None
    assert "BLOCK_SIZE_K 256" in (block_shape_fits(_c(16, 64, 256), (128, 128)) or "")
    # BLOCK_N: divides block_n (one scale per tile) or a multiple of it (one per column)
    assert block_shape_fits(_c(16, 256, 128), (128, 128)) is None
    assert "BLOCK_SIZE_N 64" in (block_shape_fits(_c(16, 64, 128), (96, 128)) or "")
    assert block_shape_fits(_c(16, 64, 256), None) is None
    kept, rejected = prune(search_space(), shared_memory_limit=H200_SMEM, shape=FP8, arch="sm90")
    assert {c["BLOCK_SIZE_K"] for c in kept} == {64, 128}
    assert all(c["BLOCK_SIZE_K"] != 256 for c in kept)
    assert len(kept) + len(rejected) == 1920
    # 1,920 less the third with BLOCK_K 256, less what overruns the H200's shared memory
    assert len(kept) == 1280 - sum(
        1
        for c in search_space()
        if c["BLOCK_SIZE_K"] != 256 and shared_memory_bytes(c, 1, (128, 128), "sm90") > H200_SMEM
    )
    assert default_config(1, FP8) in kept


def test_fp8_shared_memory_is_one_byte_per_element_plus_the_scales():
    c = _c(64, 128, 128, s=4)
    assert shared_memory_bytes(c) == 4 * (64 * 128 + 128 * 128) * 2 == 196_608
    # 1 byte per element; scales: BLOCK_M activation scales + one weight scale (BLOCK_N = block_n)
    assert shared_memory_bytes(c, 1, (128, 128)) == 98_304 + 4 * (64 + 1) * 4
    wide = _c(64, 256, 128, s=4)  # BLOCK_N > block_n: one weight scale per column
    assert (
        shared_memory_bytes(wide, 1, (128, 128)) == 4 * (64 * 128 + 128 * 256) + 4 * (64 + 256) * 4
    )
    # what bf16 cannot hold on the H200, fp8 can
    big = _c(256, 256, 128, s=3)
    assert shared_memory_bytes(big) > H200_SMEM >= shared_memory_bytes(big, 1, (128, 128))


def test_refusals():
    assert kernel_refusal("sglang", FP8) is None
    assert kernel_refusal("sglang", MoeShape(E=8, N=64, K=64, topk=2)) is None
    assert "no fp8 path" in (kernel_refusal("reference", FP8) or "")
    per_tensor = MoeShape(E=8, N=64, K=64, topk=2, dtype="fp8_w8a8")
    assert "--block-shape" in (kernel_refusal("sglang", per_tensor) or "")


def _tune(tmp_path, *extra):
    return main(
        ["--ledger", str(tmp_path / "l.duckdb"), "run", "tune", "-E", "128", "-N", "768", "-K"]
        + ["2048", "--topk", "8", *extra]
    )


def test_cli_reference_kernel_refuses_fp8(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        _tune(tmp_path, "--dtype", "fp8_w8a8", "--kernel", "reference")
    err = capsys.readouterr().err
    assert exc.value.code == 3 and "reference kernel" in err and "--kernel sglang" in err


def test_cli_block_shape_only_for_fp8(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        _tune(tmp_path, "--block-shape", "128,128")
    assert exc.value.code not in (0, None)
    assert "--dtype fp8_w8a8" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        _tune(tmp_path, "--dtype", "fp8_w8a8", "--block-shape", "128")
    assert exc.value.code not in (0, None)


@pytest.mark.engine("torch")
def test_quantisation_round_trip_on_cpu():
    import torch

    if not hasattr(torch, "float8_e4m3fn"):
        pytest.skip("this torch has no float8_e4m3fn")
    from runners.moe.fp8_quant import (
        FP8_MAX,
        dequantize_blocks,
        quantize_blocks,
        quantize_token_groups,
    )

    g = torch.Generator().manual_seed(0)
    w = torch.randn(2, 256, 384, generator=g)
    w[0, :128, :128] *= 100  # one block far larger: its own scale, the others unaffected
    q, s = quantize_blocks(w, 128, 128)
    assert q.dtype == torch.float8_e4m3fn and q.shape == w.shape and s.shape == (2, 2, 3)
    assert torch.allclose(s[0, 0, 0], w[0, :128, :128].abs().max() / FP8_MAX)
    back = dequantize_blocks(q, s, (128, 128))
    rel = ((back - w).abs().max() / w.abs().max()).item()
    assert rel < 2**-3  # e4m3: 3 mantissa bits
    a = torch.randn(5, 300, generator=g)  # K not a multiple of the group: a short last group
    qa, sa = quantize_token_groups(a, 128)
    assert qa.shape == a.shape and sa.shape == (5, 3)
    err = (dequantize_blocks(qa, sa, (1, 128)) - a).abs().max() / a.abs().max()
    assert err.item() < 2**-3
    ref = a[:, :256] @ w[1, :, :256].T
    deq = dequantize_blocks(qa, sa, (1, 128))[:, :256] @ back[1, :, :256].T
    assert ((deq - ref).abs().max() / ref.abs().max()).item() < 6e-2


class _Fp8Double:
    """A measurer whose time is a smooth function of the config (no GPU): enough for the events."""

    kernel = type(
        "K",
        (),
        dict(
            source="sglang",
            version="0.5.23",
            name="sglang.kernels.ops.moe.fused_moe_triton_kernels.fused_moe_kernel",
        ),
    )()
    facts = {
        "gpu_name": "NVIDIA H200",
        "compute_capability": "sm90",
        "gpu_memory_mib": 143_771,
        "shared_memory_limit": H200_SMEM,
        "triton_version": "3.6.0",
        "torch_version": "2.11.0",
        "cuda": "12.9",
    }

    def prepare(self, M, configs):
        pass

    def check(self, M, config):
        return 1e-2

    def time(self, M, config, budget_ms):
        c = config
        return (
            20.0
            + abs(c["BLOCK_SIZE_M"] - 16) / 8
            + abs(c["BLOCK_SIZE_N"] - 64) / 32
            + c["num_stages"]
        )

    def experts_touched(self, M):
        return min(FP8.E, M * FP8.topk)


def test_fp8_bench_output_folds_into_data_and_tables(tmp_path, monkeypatch, capsys):
    """What bench/h200_moe_tune.py --fp8 writes, from a test double, through
    ``bench/h200_data.py build-moe-fp8`` and ``tables`` (bf16 events kept, fp8 added once)."""
    import importlib.util
    import shutil
    import statistics
    import tarfile
    from pathlib import Path

    from runners.moe.tune import JsonlSink, TuneSpec, run_tune, time_interleaved

    run = tmp_path / "out"
    run.mkdir()
    m = _Fp8Double()
    spec = TuneSpec(
        shape=FP8,
        batch_sizes=[1, 8],
        sample=0.02,
        rounds=2,
        output_dir=run / "moe_configs_fp8",
        session_id="h200-moe-tune-fp8",
    )
    rep = run_tune(spec, m, JsonlSink(str(run / "h200_moe_fp8_tune.jsonl")), say=lambda _l: None)
    rows = {}
    for M in rep.best:
        cfgs = {"default": default_config(M, FP8), "tuned": rep.best[M]}
        t = time_interleaved(m, M, cfgs, rounds=3, budget_ms=10.8)
        rows[str(M)] = {
            k: {"median_us": statistics.median(v), "all_us": v, "config": cfgs[k]}
            for k, v in t.items()
        }
    comp = {
        "tolerance": 6e-2,
        "budget_ms": 10.8,
        "shapes": {
            "Q": {"shape": FP8.describe(), "tune_id": rep.tune_id, "rows": rows},
            "A": {"shape": "E=64 ...", "skipped": "40 s left"},
        },
    }
    (run / "h200_moe_fp8_compare.json").write_text(json.dumps(comp))
    with tarfile.open(run / "fp8_cfgs.tgz", "w:gz") as tar:
        tar.add(run / "moe_configs_fp8", arcname="moe_configs_fp8")
    root = Path(__file__).resolve().parents[2]
    spec_ = importlib.util.spec_from_file_location("h200_data", root / "bench" / "h200_data.py")
    mod = importlib.util.module_from_spec(spec_)  # type: ignore[arg-type]
    spec_.loader.exec_module(mod)  # type: ignore[union-attr]
    data = tmp_path / "h200_moe_tune.jsonl"
    shutil.copy(root / "data" / "h200_moe_tune.jsonl", data)
    # the committed file may already hold an fp8 run: it is replaced, the rest kept
    before = sum('"h200-moe-tune-fp8"' not in x for x in data.read_text().splitlines())
    monkeypatch.setattr(mod, "MOE", data)
    mod.build_moe_fp8(run)
    mod.build_moe_fp8(run)  # again: the fp8 events are replaced, not doubled
    after = data.read_text().splitlines()
    fp8 = [json.loads(x) for x in after if '"h200-moe-tune-fp8"' in x]
    assert len(after) == before + len(fp8)
    recorded = [e for e in fp8 if e["type"] == "moe_config_recorded"]
    assert [e["file_name"] for e in recorded] == [
        "E=128,N=768,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128, 128].json"
    ]
    capsys.readouterr()
    mod.tables()
    out = capsys.readouterr().out
    assert "E=128 N=768 K=2048 top-8 fp8_w8a8 block [128, 128]" in out
    assert "E=64 N=640 K=3584 top-8 bf16" in out  # the bf16 tables are still there
