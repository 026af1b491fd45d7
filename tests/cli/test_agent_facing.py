"""What an agent meets first: `views` needed a ledger (an agent asks for the views before it has
one); the answer is the same for every ledger of this version, so none is needed."""

from __future__ import annotations

from pathlib import Path

from tests.support.cli_inprocess import invoke


def test_views_lists_the_views_without_a_ledger(tmp_path: Path) -> None:
    missing = tmp_path / "none.duckdb"
    out = invoke(["--ledger", missing, "views"])
    assert out.returncode == 0, out.stderr
    lines = dict(line.split(": ", 1) for line in out.stdout.splitlines())
    assert "candidate_id" in lines["board"] and "verdict" in lines["benchmark_deltas"]
    assert not missing.exists() and list(tmp_path.iterdir()) == []  # nothing created
    # with a ledger: the same answer
    ledger = tmp_path / "l.duckdb"
    assert invoke(["--ledger", ledger, "init"]).returncode == 0
    assert invoke(["--ledger", ledger, "views"]).stdout == out.stdout
