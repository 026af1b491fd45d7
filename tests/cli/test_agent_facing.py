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


def test_show_format_json_is_one_document_with_the_links_inside(tmp_path: Path) -> None:
    """`show` printed JSON, then a text section of links: not parseable as JSON."""
    import json

    ledger = tmp_path / "l.duckdb"
    assert invoke(["--ledger", ledger, "init"]).returncode == 0
    out = invoke(
        ["--ledger", ledger, "--session", "s", "append", "note_added", "-f", "text=why", "--json"]
    )
    note = json.loads(out.stdout)[0]["event_id"]
    out = invoke(["--ledger", ledger, "--session", "s", "append", "decision_recorded",
                  "-f", "decision=keep", "-f", f'evidence_event_ids=["{note}"]', "--json"])  # fmt: skip
    decision = json.loads(out.stdout)[0]["event_id"]
    out = invoke(["--ledger", ledger, "show", note[:13], "--format", "json"])
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)  # the whole output parses
    assert doc["event"]["event_id"] == note and doc["event"]["text"] == "why"
    assert doc["linked"] == [
        {"seq": 2, "event_id": decision, "relation": "cites this", "type": "decision_recorded",
         "summary": "decision: keep"}
    ]  # fmt: skip
    text = invoke(["--ledger", ledger, "show", note[:13]]).stdout
    assert "linked events" in text  # the default stays the text a person reads
