"""What an agent meets first: `views` needed a ledger (an agent asks for the views before it has
one); the answer is the same for every ledger of this version, so none is needed."""

from __future__ import annotations

import json
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


def test_with_json_output_asked_for_an_error_is_json_on_stderr(tmp_path: Path) -> None:
    """An agent that asked for JSON got a text line when the command failed."""
    import json

    missing = tmp_path / "none.duckdb"
    out = invoke(["--ledger", missing, "append", "note_added", "-f", "text=x", "--json"])
    assert out.returncode == 5 and out.stdout == ""
    assert json.loads(out.stderr) == {
        "error": {"exit_code": 5, "meaning": "not-found", "message": f"no ledger at {missing} (create it with `tuneledger init`, or pass --create)"}
    }  # fmt: skip
    ledger = tmp_path / "l.duckdb"
    invoke(["--ledger", ledger, "init"])
    out = invoke(["--ledger", ledger, "sql", "DROP VIEW board", "--format", "json"])
    assert out.returncode == 6 and json.loads(out.stderr)["error"]["exit_code"] == 6
    out = invoke(["--ledger", ledger, "append", "note_added", "-f", "txt=x", "--json"])
    assert (
        out.returncode == 3 and "unknown field 'txt'" in json.loads(out.stderr)["error"]["message"]
    )
    # without JSON asked for: the one text line
    out = invoke(["--ledger", missing, "append", "note_added", "-f", "text=x"])
    assert out.stderr.startswith("tuneledger: error: no ledger at") and out.stderr.count("\n") == 1


def test_show_help_says_a_prefix_must_be_unique_and_where_the_random_part_is(
    tmp_path: Path,
) -> None:
    """UUIDv7's first 12 hex digits are its millisecond: events appended in one call share a
    prefix of 8, which is then refused as ambiguous (exit 3), as the help says."""
    help_text = " ".join(invoke(["show", "--help"]).stdout.split())
    assert "unique prefix" in help_text and "is enough" not in help_text
    assert "first 12 hex digits are the millisecond" in help_text
    ledger = tmp_path / "l.duckdb"
    lines = "".join(f'{{"type": "note_added", "text": "n{i}"}}\n' for i in range(20))
    assert invoke(["--ledger", ledger, "append", "--create"], stdin=lines).returncode == 0
    ids = invoke(["--ledger", ledger, "events", "--json"]).stdout
    first = json.loads(ids)[0]["event_id"]
    shared = [e["event_id"] for e in json.loads(ids) if e["event_id"][:8] == first[:8]]
    if len(shared) > 1:  # recorded within the same ~65 s: the time digits are shared
        out = invoke(["--ledger", ledger, "show", first[:8]])
        assert out.returncode == 3 and "ambiguous" in out.stderr
    assert invoke(["--ledger", ledger, "show", first]).returncode == 0


def test_the_evidence_a_decision_prints_resolves_with_show(tmp_path: Path) -> None:
    """``decide`` printed its evidence's ids cut to 12 characters, which two notes appended
    within the same second share: ``show`` refused them as ambiguous."""
    ledger = tmp_path / "l.duckdb"
    assert invoke(["--ledger", ledger, "init"]).returncode == 0
    ids = []
    for text in ("a", "b", "c"):
        out = invoke(["--ledger", ledger, "--session", "s", "append", "note_added", "-f", f"text={text}", "--json"])  # fmt: skip
        ids.append(json.loads(out.stdout)[0]["event_id"])
    out = invoke(["--ledger", ledger, "--session", "s", "decide", "keep", "--evidence", ids[1]])
    assert out.returncode == 0, out.stderr
    (cited,) = [ln.split()[1] for ln in out.stdout.splitlines() if ln.strip().startswith("cites")]
    assert cited == ids[1]
    shown = invoke(["--ledger", ledger, "show", cited, "--json"])
    assert shown.returncode == 0 and json.loads(shown.stdout)["event"]["event_id"] == ids[1]


def test_a_rerun_triage_or_decision_is_said_as_append_says_it(tmp_path: Path) -> None:
    """Re-running the README's ``triage`` and ``decide`` lines stored each a second time with no
    word, where ``append`` warns; a retry with ``--event-id`` stores and says nothing."""
    ledger = tmp_path / "l.duckdb"
    assert invoke(["--ledger", ledger, "init"]).returncode == 0
    base = ["--ledger", ledger, "--session", "s"]
    assert invoke([*base, "propose", "Foo", "--flag", "--foo"]).returncode == 0
    triage = [*base, "triage", "flag:foo", "deferred", "--reason", "no data yet"]
    first, again = invoke(triage), invoke(triage)
    assert first.returncode == again.returncode == 0 and first.stderr == ""
    assert again.stderr.startswith("tuneledger: warning: the same candidate_triaged is already")
    assert "appended again; give --event-id" in again.stderr
    decide = [*base, "decide", "keep foo off", "--candidate", "flag:foo", "--rationale", "r"]
    first, again = invoke(decide), invoke(decide)
    assert first.stderr == "" and "the same decision_recorded is already" in again.stderr
    pinned = [*decide[:-1], "r2", "--event-id", "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"]
    first, again = invoke(pinned), invoke(pinned)
    assert first.returncode == again.returncode == 0 and again.stderr == ""
