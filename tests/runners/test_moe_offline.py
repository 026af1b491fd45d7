"""``run tune --arch sm120``: configs for the RTX PRO 6000 Blackwell without that GPU — seeded
from SGLang's shipped SM120 files, fitted to 101,376 B of shared memory under the mma.sync
(num_stages - 1) rule (docs/engines.md), recorded as not measured on that arch."""

from __future__ import annotations

import json

import pytest

from ledger.cli.main import main
from ledger.store import LedgerStore
from runners.moe.space import MoeShape, shared_memory_bytes
from runners.moe.tune import SGLANG_CONFIG_DIR
from runners.moe.tune_offline import NOT_MEASURED, fits, offline_configs, shipped_for

SHAPE = MoeShape(E=256, N=512, K=3072, topk=8)
NAME = "E=256,N=512,device_name=NVIDIA_RTX_PRO_6000_Blackwell_Server_Edition"


def _c(m, n, k, g=1, w=4, s=3):
    return dict(
        BLOCK_SIZE_M=m, BLOCK_SIZE_N=n, BLOCK_SIZE_K=k, GROUP_SIZE_M=g, num_warps=w, num_stages=s
    )


def _package(tmp_path):
    """An sglang package folder with SM120 files: M=64's entry is the public SM120 crash's
    tiles (64/128/128 at 4 stages: (4 - 1) x 49,152 = 147,456 B > 101,376 B)."""
    folder = tmp_path.joinpath("sglang", *SGLANG_CONFIG_DIR, "triton_3_6_0")
    folder.mkdir(parents=True)
    up = {"1": _c(16, 32, 128, s=4), "64": _c(64, 128, 128, s=4)}
    down = {"1": _c(16, 64, 64, s=2), "64": _c(32, 64, 64, s=3)}
    (folder / f"{NAME}.json").write_text(json.dumps(up))
    (folder / f"{NAME}_down.json").write_text(json.dumps(down))
    return tmp_path / "sglang"


def test_shipped_sm120_seeds_are_kept_where_they_fit_and_fitted_where_not(tmp_path):
    shipped = shipped_for(SHAPE, "sm120", _package(tmp_path))
    assert [p.rsplit("/", 1)[1] for p in shipped["from"]] == [f"{NAME}.json", f"{NAME}_down.json"]
    res = offline_configs(SHAPE, "sm120", [1, 64], shipped["up"], shipped["down"])
    assert res.up[1] == _c(16, 32, 128, s=4) and res.origins["1"] == "shipped fits as is"
    assert shared_memory_bytes(_c(64, 128, 128, s=4), 2, None, "sm120") == 147_456
    assert res.up[64] == _c(64, 128, 128, s=3)  # 98,304 B
    assert res.origins["64"] == "shipped num_stages 4->3"
    # the down GEMM keeps the up config's BLOCK_SIZE_M (SGLang forces it)
    assert res.down[64] == _c(64, 64, 64, s=3)
    assert all(fits(c, SHAPE, "sm120") for c in [*res.up.values(), *res.down.values()])


def test_cli_arch_sm120_writes_the_pair_without_a_gpu_and_says_not_measured(
    tmp_path, capsys, monkeypatch
):
    import runners.moe.tune_offline as offline

    package = _package(tmp_path)
    real = offline.shipped_for
    monkeypatch.setattr(offline, "shipped_for", lambda shape, arch: real(shape, arch, package))
    ledger = tmp_path / "l.duckdb"
    out = tmp_path / "out"
    args = ["--ledger", str(ledger), "run", "tune", "-E", "256", "-N", "512", "-K", "3072"]
    args += ["--topk", "8", "--arch", "sm120", "--output-dir", str(out), "--batch-sizes", "1,64"]
    with pytest.raises(SystemExit) as done:
        main(args)
    assert done.value.code in (0, None)
    files = sorted(p.name for p in out.rglob("*.json"))
    assert files == [f"{NAME}.json", f"{NAME}_down.json"]
    assert "not measured on this arch" in capsys.readouterr().out
    recorded = LedgerStore(ledger).read(types=["moe_config_recorded"])
    assert [e.down for e in recorded] == [False, True]
    assert all(e.origin.startswith(f"{NOT_MEASURED} (sm120)") for e in recorded)
    assert "101,376 B" in recorded[0].origin and f"{NAME}.json" in recorded[0].origin
