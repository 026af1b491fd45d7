"""``compare diff`` tells a fact one side did not record from a difference (docs/compare-runs.md):
the demo's B200 configuration listed seven facts as differing, each "not recorded", which hid
its one real difference (a flag) among them."""

from __future__ import annotations

import json
from pathlib import Path

from ledger.cli.demo import build_demo
from tests.support.cli_inprocess import invoke

UNRECORDED = [
    "attention_backend",
    "max_running_requests",
    "max_total_num_tokens",
    "context_len",
    "cuda_graph_max_bs",
    "piecewise_cuda_graph",
    "moe_kernel_config",
]


def test_the_b200_configs_unrecorded_facts_are_not_differences(tmp_path: Path) -> None:
    path = tmp_path / "demo.duckdb"
    build_demo(path)
    out = invoke(
        ["--ledger", path, "compare", "diff", "baseline", "moe-config-b200", "--format", "json"]
    )
    assert out.returncode == 0, out.stderr
    shown = json.loads(out.stdout)
    assert shown["differs"] == [
        {"section": "flag", "name": "enable-fused-moe-sum-all-reduce", "values": ["not set", "on"]}
    ]
    assert shown["unrecorded"] == {"moe-config-b200": UNRECORDED}
    text = invoke(["--ledger", path, "compare", "diff", "baseline", "moe-config-b200"]).stdout
    assert "1 row(s) differ" in text
    assert (
        "not recorded for moe-config-b200 (its server run recorded none), so not compared" in text
    )
    # two runs that both recorded them: the facts that differ are differences, as before
    both = invoke(
        [
            "--ledger",
            path,
            "compare",
            "diff",
            "baseline",
            "fused-moe+flashinfer-fusion",
            "--format",
            "json",
        ]
    )
    rows = {r["name"]: r["values"] for r in json.loads(both.stdout)["differs"]}
    assert rows["max_running_requests"] == ["48", "26"] and rows["cuda_graph_max_bs"] == [
        "48",
        "24",
    ]
    assert json.loads(both.stdout)["unrecorded"] == {}
