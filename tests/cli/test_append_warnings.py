"""Re-running the walkthrough's block appended a second session_started and the same
flag_researched again, silently; an append with no session landed in stream `ledger`,
silently. Both are stored as before, and said on standard error with the way out."""

from __future__ import annotations

from pathlib import Path

from ledger.store import LedgerStore
from tests.support.cli_inprocess import invoke


def test_re_running_the_walkthroughs_appends_warns_and_an_event_id_stores_once(
    tmp_path: Path,
) -> None:
    ledger = tmp_path / "l.duckdb"
    env = {"TUNELEDGER_LEDGER": str(ledger), "TUNELEDGER_SESSION": "tiny-moe-cb"}
    assert invoke(["init"], env=env).returncode == 0
    start = ["append", "session_started", "-f", "title=Continuous batching", "-f", "model=m"]
    flag = ["append", "flag_researched", "-f", "flag=continuous-batching", "-f", "verdict=unknown"]
    for args in (start, flag):
        out = invoke(args, env=env)
        assert out.returncode == 0 and out.stderr == "", out.stderr
    again = invoke(start, env=env)
    assert again.returncode == 0
    assert (
        again.stderr.startswith(
            "tuneledger: warning: session tiny-moe-cb was already started (seq 1, event "
        )
        and "--event-id" in again.stderr
    )
    again = invoke(flag, env=env)
    assert "the same flag_researched is already in session tiny-moe-cb (seq 2" in again.stderr
    # another verdict on the same flag is a new fact: nothing to say
    other = invoke([*flag[:-1], "verdict=no-op"], env=env)
    assert other.returncode == 0 and other.stderr == ""
    # with --event-id a re-run stores it once, and says nothing
    fixed = [*start, "--event-id", "0192ab34-8f1c-7000-8000-000000000001"]
    session2 = {**env, "TUNELEDGER_SESSION": "s2"}
    assert invoke(fixed, env=session2).stderr == ""
    out = invoke([*fixed, "--json"], env=session2)
    assert out.stderr == "" and '"duplicate": true' in out.stdout
    assert LedgerStore(ledger).head() == 6


def test_an_append_without_a_session_says_where_it_went(tmp_path: Path) -> None:
    ledger = tmp_path / "l.duckdb"
    assert invoke(["--ledger", ledger, "init"]).returncode == 0
    out = invoke(["--ledger", ledger, "append", "note_added", "-f", "text=x"], env={})
    assert out.returncode == 0
    assert out.stderr == (
        "tuneledger: warning: note_added has no session: it is stored in stream ledger, where no "
        "session's views or decision log show it (give --session or set TUNELEDGER_SESSION)\n"
    )
    rows = LedgerStore(ledger).query_arrow("SELECT stream, session_id FROM events").to_pylist()
    assert rows == [{"stream": "ledger", "session_id": None}]
