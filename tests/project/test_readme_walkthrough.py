"""README.md's "Your first session" runs as written (docs tested against the code).

The fenced ``sh`` blocks of that section are extracted from README.md and run by bash, in a
scratch folder that holds what a fresh clone has at its root (links to ``.venv``, ``examples``
and ``tests``), so the commands run exactly as a new user types them from the repository root.
``make`` lines (the one-time set-up) are checked as make targets (``make -n``), not run. Then
the ledger is checked: every step left its events. Needs torch and transformers (the e2e
extra), like tests/runners/test_e2e_transformers.py; offline (the model is built locally).
"""

from __future__ import annotations

import subprocess

import pytest

from ledger.store import LedgerStore
from tests.support.readme_walkthrough import (
    ROOT,
    Walkthrough,
    walkthrough_blocks,
)

#: Process-based on purpose (the README's shell blocks run by bash), the engine tier: `make test-engines` runs it.
pytestmark = [pytest.mark.slow, pytest.mark.engine("torch", "transformers", "fastapi")]


def test_the_walkthrough_has_every_step() -> None:
    script = "\n".join(walkthrough_blocks((ROOT / "README.md").read_text()))
    # the triage and the decision are verbs: no SQL piped through tail and tr, no shell case
    assert "| tail" not in script and "tr ," not in script and "case " not in script
    for step in (
        "tuneledger init",
        "tuneledger research --engine sglang==",
        "tuneledger append flag_researched",
        "tuneledger run server start",
        "tuneledger run bench",
        "tuneledger run plan examples/plan.toml",
        "benchmark_deltas",
        "tuneledger triage flag:continuous-batching --by-verdict",
        "tuneledger decide",
        "tuneledger compare diff",
        "tuneledger export markdown",
    ):
        assert step in script, step


def test_readme_first_session_runs_as_written(readme_walkthrough_run: Walkthrough) -> None:
    blocks = walkthrough_blocks((ROOT / "README.md").read_text())
    make_lines = [
        line for block in blocks for line in block.splitlines() if line.startswith("make ")
    ]
    for line in make_lines:
        target = line.split("#")[0].split()[1:]
        assert (
            subprocess.run(["make", "-n", *target], cwd=ROOT, capture_output=True).returncode == 0
        ), line
    out = readme_walkthrough_run  # run once for this test and the MCP session's comparison
    print(out.stdout)
    assert out.returncode == 0, out.stderr[-4000:]
    assert "Plan verdicts" in out.stdout and "Traceback" not in out.stderr

    store = LedgerStore(out.folder / "first-session.duckdb")
    types = {
        r["type"]: r["n"]
        for r in store.query_arrow(
            "SELECT type, count(*) AS n FROM timeline GROUP BY type"
        ).to_pylist()
    }
    assert types["session_started"] == 1 and types["flag_researched"] > 1
    # the research step: the flag given and the version's dead and inactive flags, from source
    researched = store.query_arrow(
        "SELECT flag, verdict FROM flag_verdicts WHERE basis = 'source' "
        "AND engine_version = '0.5.23' AND arch = 'sm120'"
    ).to_pylist()
    assert {"flag": "enable-flashinfer-allreduce-fusion", "verdict": "incompatible"} in researched
    assert {"flag": "num-continuous-decode-steps", "verdict": "dead-code"} in researched
    assert types["server_started"] == 1 + 2 * 3 and types["comparison_completed"] >= 6
    bench = store.query_arrow("SELECT config_name, source FROM benchmarks ORDER BY seq").to_pylist()
    assert bench[0]["source"].startswith("tuneledger run bench --url http://127.0.0.1:")
    assert bench[-1]["source"] == "examples/plan.toml"
    assert store.read(types=["server_stopped"]) and not store.read(types=["server_failed"])
    # the walkthrough records the triage and the decision its verdict supports, from
    # the CLI, citing the comparison at c=4; the export reads as a PR description
    verdict = store.query_arrow(
        "SELECT verdict FROM benchmark_deltas WHERE config_name = 'continuous-batching' "
        "AND concurrency = 4 AND metric = 'output_throughput'"
    ).to_pylist()[0]["verdict"]
    status = {"improved": "accepted", "regressed": "rejected"}.get(verdict, "deferred")
    (board,) = store.query_arrow(
        "SELECT status, reason FROM board WHERE candidate_id = 'flag:continuous-batching'"
    ).to_pylist()
    assert board == {"status": status, "reason": f"output throughput at c=4: {verdict}"}
    (decision,) = store.read(types=["decision_recorded"])
    assert decision.decision == f"Continuous batching: {status}"
    (cited,) = decision.evidence_event_ids
    assert store.get(cited).type == "comparison_completed"
    assert "continuous-batching" in out.stdout.split("what differs")[1]  # compare diff
    decisions = (out.folder / "first-session-decisions.md").read_text()
    assert "CPU" in decisions
    order = [
        decisions.index(h) for h in ("## Decisions", "## Verdicts", "## Triage", "## Timeline")
    ]
    assert order == sorted(order)
    assert f"### 1. Continuous batching: {status}" in decisions
    assert "runner fingerprint" not in decisions and "host observations disagree" not in decisions
    assert "| ? |" not in decisions and "counts per type" in decisions
    assert "## Comparing the configurations" in decisions
    assert (out.folder / "first-session-decisions-pareto.svg").read_text().startswith("<?xml")
