"""The ``tuneledger`` CLI against a real ledger file, run in this process (``cli_inprocess``:
``main`` with its own stdin/stdout/stderr); the process itself is tested where it matters
(tests/project/test_packaging.py, tests/cli/test_startup.py, test_the_console_script_is_a_process here)."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli_inprocess import invoke


def run(
    ledger: Path, *args: str, stdin: str | None = None, actor: str = "agent:test"
) -> subprocess.CompletedProcess[str]:
    return invoke(["--ledger", str(ledger), "--actor", actor, *args], stdin=stdin)


@pytest.fixture()
def ledger(tmp_path: Path) -> Path:
    path = tmp_path / "cli.duckdb"
    assert run(path, "init").returncode == 0
    return path


def count(ledger: Path) -> int:
    out = run(ledger, "sql", "SELECT count(*) AS n FROM events", "--format", "json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)[0]["n"]


def test_append_from_options_with_dotted_fields(ledger: Path) -> None:
    out = run(
        ledger,
        "append",
        "benchmark_completed",
        "-f",
        "run_id=b1",
        "-f",
        "config_name=baseline",
        "-f",
        "concurrency=64",
        "-f",
        "metrics.output_throughput=1582.5",
        "--session",
        "s1",
        "--json",
        actor="runner:test",  # a runner's event type: a runner's to append
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)[0]
    assert (
        result["seq"] == 1 and result["stream"] == "bench:baseline" and result["duplicate"] is False
    )
    rows = json.loads(
        run(
            ledger,
            "sql",
            "SELECT config_name, concurrency, output_throughput, session_id FROM benchmarks",
            "--format",
            "json",
        ).stdout
    )
    assert rows == [
        {
            "config_name": "baseline",
            "concurrency": 64,
            "output_throughput": 1582.5,
            "session_id": "s1",
        }
    ]
    shown = run(ledger, "events", "--format", "json")
    event = json.loads(shown.stdout)[0]  # one JSON array of full events
    assert event["actor"] == {"kind": "runner", "name": "test"}


def test_stdin_jsonl_batch_is_atomic_and_errors_name_the_line(ledger: Path) -> None:
    good = json.dumps({"type": "note_added", "text": "one"})
    truncated = '{"type": "note_added", "text": "tw'
    out = run(ledger, "append", stdin=good + "\n" + truncated + "\n")
    assert out.returncode == 3
    assert out.stderr.strip().count("\n") == 0, "one-line error"
    assert "<stdin>:2: not valid JSON" in out.stderr
    assert count(ledger) == 0

    wrong_type = json.dumps(
        {
            "type": "benchmark_completed",
            "run_id": "r",
            "config_name": "c",
            "metrics": {"output_throughput": "fast"},
        }
    )
    out = run(ledger, "append", stdin=good + "\n" + wrong_type + "\n", actor="runner:test")
    assert (
        out.returncode == 3
        and "<stdin>:2" in out.stderr
        and "metrics.output_throughput" in out.stderr
    )
    unknown = json.dumps({"type": "flag_exploded"})
    out = run(ledger, "append", stdin=unknown)
    assert out.returncode == 3 and "unknown event type 'flag_exploded'" in out.stderr
    assert count(ledger) == 0

    out = run(
        ledger,
        "append",
        "--json",
        stdin=json.dumps(
            [{"type": "note_added", "text": "a"}, {"type": "note_added", "text": "b"}]
        ),
    )
    assert out.returncode == 0, out.stderr
    assert [r["seq"] for r in json.loads(out.stdout)] == [1, 2]


def test_retry_with_event_id_is_idempotent(ledger: Path) -> None:
    event = json.dumps(
        {
            "type": "note_added",
            "text": "retry me",
            "event_id": "01923456-7890-7abc-8def-0123456789ab",
        }
    )
    first = json.loads(run(ledger, "append", "--json", stdin=event).stdout)[0]
    second = json.loads(run(ledger, "append", "--json", stdin=event).stdout)[0]
    assert first["seq"] == second["seq"] == 1 and second["duplicate"] is True
    assert count(ledger) == 1
    other = json.dumps(
        {
            "type": "note_added",
            "text": "different",
            "event_id": "01923456-7890-7abc-8def-0123456789ab",
        }
    )
    out = run(ledger, "append", stdin=other)
    assert out.returncode == 8 and "already stored with other content" in out.stderr


def test_expected_version_conflict_exit_code(ledger: Path) -> None:
    args = (
        "append",
        "candidate_proposed",
        "-f",
        "candidate_id=flag:x",
        "-f",
        "kind=flag",
        "-f",
        "title=try x",
    )
    assert run(ledger, *args, "--expected-version", "0").returncode == 0
    out = run(ledger, *args, "--expected-version", "0")
    assert out.returncode == 4
    assert "stream 'candidate:flag:x': expected version 0, found 1" in out.stderr
    assert run(ledger, *args, "--expected-version", "1").returncode == 0


def test_a_triage_of_a_candidate_never_proposed_is_not_found(ledger: Path) -> None:
    """README exit 5: at expected version 0, or as version 1 of its stream, from options, from
    stdin and through the bulk path alike; nothing stored."""
    opts = ["append", "candidate_triaged", "-f", "candidate_id=flag:bar", "-f", "status=rejected"]
    out = run(ledger, *opts, "--expected-version", "0")
    assert out.returncode == 5 and "no candidate 'flag:bar' was proposed" in out.stderr
    triage = {"type": "candidate_triaged", "candidate_id": "flag:never", "status": "accepted"}
    out = run(ledger, "append", stdin=json.dumps({**triage, "stream_version": 1}))
    assert out.returncode == 5 and "no candidate 'flag:never' was proposed" in out.stderr
    notes = [json.dumps({"type": "note_added", "text": f"n{i}"}) for i in range(1200)]
    bulk = "\n".join([*notes, json.dumps({**triage, "stream_version": 1})])
    out = run(ledger, "append", stdin=bulk)
    assert out.returncode == 5 and "1201" in out.stderr and "flag:never" in out.stderr
    assert count(ledger) == 0
    # proposed and triaged in one batch at expected version 0: allowed
    proposal = {
        "type": "candidate_proposed",
        "candidate_id": "flag:bar",
        "kind": "flag",
        "title": "t",
    }
    both = "\n".join(json.dumps(e) for e in (proposal, {**triage, "candidate_id": "flag:bar"}))
    assert run(ledger, "append", "--expected-version", "0", stdin=both).returncode == 0


def test_events_formats_and_filters(ledger: Path) -> None:
    run(ledger, "append", "note_added", "-f", "text=a", "--session", "s1")
    run(ledger, "append", "session_started", "-f", "title=T", "--session", "s2")
    table = run(ledger, "events")
    assert table.returncode == 0 and "note: a" in table.stdout and "session: T" in table.stdout
    as_csv = list(
        csv.DictReader(
            io.StringIO(run(ledger, "events", "--format", "csv", "--session", "s2").stdout)
        )
    )
    assert [row["type"] for row in as_csv] == ["session_started"]
    as_json = json.loads(run(ledger, "events", "--format", "json", "--type", "note_added").stdout)
    assert [event["text"] for event in as_json] == ["a"]
    bad = run(ledger, "events", "--type", "nope")
    assert bad.returncode == 3 and "unknown event type" in bad.stderr


def test_show_by_prefix_lists_links(ledger: Path) -> None:
    first = json.loads(
        run(
            ledger, "append", "--json", stdin=json.dumps({"type": "note_added", "text": "cause"})
        ).stdout
    )[0]
    run(ledger, "append", "note_added", "-f", "text=effect", "--causation", first["event_id"])
    out = run(ledger, "show", first["event_id"][:13])
    assert out.returncode == 0, out.stderr
    assert '"text": "cause"' in out.stdout and "note: effect" in out.stdout
    missing = run(ledger, "show", "ffffffff-ffff")
    assert missing.returncode == 5 and "not found" in missing.stderr


@pytest.mark.parametrize(
    "statement",
    [
        "INSERT INTO events SELECT * FROM events",
        "DELETE FROM events",
        "UPDATE events SET type = 'x'",
        "DROP VIEW board",
        "ATTACH 'other.duckdb' AS other",
        "COPY events TO 'out.csv'",
        "SELECT * FROM read_csv('/etc/passwd')",
        "SET enable_external_access = true",
        "INSTALL httpfs",
        "SELECT 1; SELECT 2",
    ],
)
def test_sql_refuses_writes_and_file_access(ledger: Path, statement: str, tmp_path: Path) -> None:
    out = run(ledger, "sql", statement)
    assert out.returncode == 6, (statement, out.stderr)
    assert out.stderr.startswith("tuneledger: error:") and out.stderr.strip().count("\n") == 0
    assert not (tmp_path / "out.csv").exists() and not Path("out.csv").exists()
    assert count(ledger) == 0


def test_sql_formats(ledger: Path) -> None:
    run(ledger, "append", "note_added", "-f", "text=x")
    assert json.loads(run(ledger, "sql", "SELECT 1 AS a, 'b' AS b", "--format", "json").stdout) == [
        {"a": 1, "b": "b"}
    ]
    assert run(ledger, "sql", "SELECT 1 AS a", "--format", "csv").stdout == "a\n1\n"
    assert "board" in run(ledger, "views").stdout
    err = run(ledger, "sql", "SELECT nope FROM timeline")
    assert err.returncode == 3 and "nope" in err.stderr


def test_missing_ledger_and_usage_errors(tmp_path: Path) -> None:
    out = run(tmp_path / "none.duckdb", "events")
    assert out.returncode == 5 and "no ledger at" in out.stderr
    out = run(tmp_path / "none.duckdb", "frobnicate")
    assert out.returncode == 2 and out.stderr.strip().count("\n") == 0


FIXTURES = Path(__file__).parents[1] / "fixtures" / "sglang"


def test_import_detects_kinds_chains_runs_and_is_idempotent(ledger: Path) -> None:
    logs = [
        FIXTURES / "server" / "sm120_qwen35_baseline.log",
        FIXTURES / "server" / "sm120_qwen35_flashinfer_fusion.log",
    ]
    out = run(ledger, "import", *map(str, logs), "--session", "s", "--json")
    assert out.returncode == 0, out.stderr
    kinds = [row["kind"] for row in json.loads(out.stdout)]
    assert kinds == ["sglang-server-log", "sglang-server-log"]
    rows = json.loads(
        run(
            ledger,
            "sql",
            "SELECT max_running_requests, changes_vs_previous FROM server_runs "
            "ORDER BY started_at, run_id",
            "--format",
            "json",
        ).stdout
    )
    assert sorted(r["max_running_requests"] for r in rows) == [26, 48]
    findings = json.loads(
        run(
            ledger,
            "sql",
            "SELECT payload->>'message' AS m FROM live_events "
            "WHERE payload->>'kind' = 'capacity-reduced'",
            "--format",
            "json",
        ).stdout
    )
    assert any("max_running_requests 48 -> 26" in f["m"] for f in findings)
    before = count(ledger)
    again = json.loads(run(ledger, "import", *map(str, logs), "--session", "s", "--json").stdout)
    assert all(r["new"] == 0 for r in again) and count(ledger) == before


def test_import_of_a_bad_file_appends_nothing_from_any_file(ledger: Path, tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.log"
    garbage.write_bytes(bytes(range(256)) * 8)
    good = FIXTURES / "bench_serving" / "vllm_1129_16_64_32.jsonl"
    out = run(ledger, "import", str(good), str(garbage))
    assert out.returncode == 3 and "garbage.log" in out.stderr
    assert out.stderr.strip().count("\n") == 0
    truncated = tmp_path / "bench.jsonl"
    lines = good.read_text().splitlines()
    truncated.write_text(lines[0] + "\n" + lines[1][: len(lines[1]) // 2] + "\n")
    out = run(ledger, "import", str(truncated))
    assert out.returncode == 3 and "bench.jsonl:2" in out.stderr
    unknown = tmp_path / "notes.txt"
    unknown.write_text("hello\n")
    out = run(ledger, "import", str(unknown))
    assert out.returncode == 3 and "not a known format" in out.stderr
    assert count(ledger) == 0


def run_bare(
    *args: str, stdin: str | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return invoke(args, stdin=stdin, cwd=cwd)


def test_paths_that_are_not_ledgers_are_refused_before_anything_is_written(tmp_path: Path) -> None:
    events = tmp_path / "camp.jsonl"
    events.write_text('{"type": "note_added", "text": "x"}\n')
    before = events.read_bytes()
    note = '{"type": "note_added", "text": "lost?"}'
    out = run_bare("--ledger", str(events), "append", stdin=note)
    assert out.returncode == 3 and "not a ledger file name" in out.stderr
    assert events.read_bytes() == before
    assert run_bare("--ledger", ":memory:", "append", stdin=note).returncode == 3
    garbage = tmp_path / "garbage.duckdb"
    garbage.write_bytes(b"\x00" * 4096)
    out = run_bare("--ledger", str(garbage), "events")
    assert (
        out.returncode == 3
        and "not a DuckDB ledger file" in out.stderr
        and "Traceback" not in out.stderr
    )


def test_ledger_option_after_the_command_and_export_into_a_new_folder(tmp_path: Path) -> None:
    ledger = tmp_path / "l.duckdb"
    assert run_bare("init", "--ledger", str(ledger)).returncode == 0
    assert (
        run_bare("append", "note_added", "-f", "text=hi", "--ledger", str(ledger)).returncode == 0
    )
    out = tmp_path / "new" / "dir" / "log.md"
    assert run_bare("export", "markdown", "--ledger", str(ledger), "-o", str(out)).returncode == 0
    assert out.exists()
    assert run_bare("events", "--ledger", str(ledger), "--limit", "-1").returncode == 2


def test_export_reads_the_global_session_as_every_command_does(ledger: Path) -> None:
    for session in ("first", "second"):
        out = run(ledger, "--session", session, "append", "note_added", "-f", f"text=in {session}")
        assert out.returncode == 0, out.stderr
    both = run(ledger, "export", "markdown")
    assert (
        "# Session first" in both.stdout and "# Session second" in both.stdout
    )  # no session: every one
    # the global option, or its variable, as the session's own option
    for args, env in (((("--session", "second")), None), ((), {"TUNELEDGER_SESSION": "second"})):
        one = invoke(["--ledger", ledger, *args, "export", "markdown"], env=env)
        assert one.returncode == 0, one.stderr
        assert "# Session second" in one.stdout and "# Session first" not in one.stdout
    assert "# Session second" not in run(ledger, "export", "markdown", "--session", "first").stdout
    # a mistyped session is not every session: refused, naming it
    typo = run(ledger, "--session", "secnod", "export", "markdown")
    assert typo.returncode == 5 and "no session 'secnod'" in typo.stderr and typo.stdout == ""


def test_retracting_an_unknown_event_is_not_found(ledger: Path) -> None:
    out = run(
        ledger,
        "append",
        stdin=json.dumps(
            {
                "type": "event_retracted",
                "retracted_event_id": "00000000-0000-7000-8000-000000000000",
                "reason": "x",
            }
        ),
    )
    assert (
        out.returncode == 5
        and "no event 00000000-0000-7000-8000-000000000000 to retract" in out.stderr
    )
    assert count(ledger) == 0


def test_a_long_sql_query_is_stopped_by_its_timeout(ledger: Path) -> None:
    out = run(ledger, "sql", "SELECT count(*) FROM range(400000000000)", "--timeout", "0.5")
    # its own exit code: 6 means "refused", and this query was allowed
    assert out.returncode == 14 and "query stopped after 0.5 s" in out.stderr
    # and the ledger is free again for writers
    assert run(ledger, "append", "note_added", "-f", "text=after").returncode == 0


def test_import_into_a_mistyped_path_creates_nothing(tmp_path: Path) -> None:
    """`import` on a missing ledger is exit 5 and creates neither the file nor its folder
    (it had created both, found by a new user's try), unless --create."""
    bench = sorted((Path(__file__).parents[1] / "fixtures/sglang/bench_serving").glob("*.jsonl"))[0]
    missing = tmp_path / "no" / "x.duckdb"
    out = run_bare("--ledger", str(missing), "import", str(bench))
    assert out.returncode == 5 and str(missing) in out.stderr and "--create" in out.stderr
    assert not missing.parent.exists()
    flat = tmp_path / "x.duckdb"
    assert run_bare("--ledger", str(flat), "import", "--create", str(bench)).returncode == 0
    assert flat.exists()


def test_a_mistyped_path_is_not_a_new_ledger(tmp_path: Path) -> None:
    """`append` on a missing ledger fails like `events` (exit 5) unless --create;
    `init` into a missing directory refuses unless --parents."""
    missing = tmp_path / "ledgr.duckdb"
    out = run_bare("--ledger", str(missing), "append", "note_added", "-f", "text=x")
    assert out.returncode == 5 and str(missing) in out.stderr and "--create" in out.stderr
    assert not missing.exists()
    assert (
        run_bare(
            "--ledger", str(missing), "append", "--create", "note_added", "-f", "text=x"
        ).returncode
        == 0
    )
    assert missing.exists()
    nested = tmp_path / "no" / "such" / "l.duckdb"
    out = run_bare("--ledger", str(nested), "init")
    assert out.returncode == 5 and "--parents" in out.stderr and not nested.parent.exists()
    assert (
        run_bare("--ledger", str(nested), "init", "--parents").returncode == 0 and nested.exists()
    )
    # --create makes a file, not folders (a mistyped folder is not a new ledger's).
    elsewhere = tmp_path / "no" / "where" / "l.duckdb"
    out = run_bare("--ledger", str(elsewhere), "append", "--create", "note_added", "-f", "text=x")
    assert out.returncode == 5 and "init --parents" in out.stderr and not elsewhere.parent.exists()


def test_cli_behaviour_a_new_user_meets(tmp_path: Path) -> None:
    """--ledger after any subcommand, tui without a terminal, types and their fields,
    the actor when $USER is empty."""
    ledger = tmp_path / "l.duckdb"
    assert run_bare("init", "--ledger", str(ledger)).returncode == 0
    # `run bench` / `run plan` accept --ledger after the command (an unreachable server: exit 13, recorded nothing)
    out = run_bare(
        "run",
        "bench",
        "--url",
        "http://127.0.0.1:9",
        "--model",
        "m",
        "--num-prompts",
        "1",
        "--no-progress",
        "--ledger",
        str(ledger),
    )
    assert (
        out.returncode == 13 and "connection refused" in out.stderr and "Timeout" not in out.stderr
    ), out.stderr
    out = run_bare("run", "plan", str(tmp_path / "none.toml"), "--ledger", str(ledger))
    assert out.returncode == 5 and "no plan file" in out.stderr
    # every missing input file is "not found" (5), as import's is: a spec, a servers TOML
    out = run_bare("run", "spec", str(tmp_path / "none.toml"), "--ledger", str(ledger))
    assert out.returncode == 5 and "no spec file" in out.stderr
    missing = str(tmp_path / "none.toml")
    out = run_bare("run", "server", "show", "x", "--configs", missing, "--ledger", str(ledger))
    assert out.returncode == 5 and "no configuration file" in out.stderr
    # the TUI without a terminal: one line, exit 2, no hang (stdin/stdout are pipes here)
    out = run_bare("tui", "--ledger", str(ledger))
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "needs a terminal" in out.stderr
    # each event type's fields with types and units
    out = run_bare("types", "benchmark_completed")
    assert out.returncode == 0
    line = next(
        x for x in out.stdout.splitlines() if x.strip().startswith("metrics.median_ttft_ms")
    )
    assert "number" in line and " ms" in line
    assert "tok/s" in next(
        x for x in out.stdout.splitlines() if x.strip().startswith("metrics.output_throughput")
    )
    out = run_bare("append", "flag_researched", "--help")
    assert out.returncode == 0 and "verdict" in out.stdout and "one of effective|" in out.stdout
    assert run_bare("types", "nope").returncode == 3
    # the actor falls back to the login name when $USER is empty
    import getpass

    env = {**os.environ, "USER": ""}
    env.pop("TUNELEDGER_ACTOR", None)
    out = invoke(
        ["--ledger", str(ledger), "append", "note_added", "-f", "text=hi", "--json"], env=env
    )
    assert out.returncode == 0, out.stderr
    who = run(
        ledger,
        "sql",
        "SELECT actor_name FROM timeline WHERE type = 'note_added'",
        "--format",
        "json",
    )
    assert json.loads(who.stdout) == [{"actor_name": getpass.getuser()}]


@pytest.mark.slow
def test_the_console_script_is_a_process(tmp_path: Path) -> None:
    """The installed ``tuneledger`` script as a real process (the other tests here call
    ``main`` in-process): stdin read as bytes, JSON on stdout, a one-line error and its
    exit code on stderr, and what was acknowledged is in the file afterwards."""
    exe = Path(sys.executable).parent / "tuneledger"
    ledger = tmp_path / "l.duckdb"

    def proc(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(exe), "--ledger", str(ledger), "--actor", "agent:test", *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
        )

    assert proc("init").returncode == 0
    out = proc("append", "--json", stdin='{"type": "note_added", "text": "über"}\n')
    assert out.returncode == 0 and json.loads(out.stdout)[0]["seq"] == 1, out.stderr
    out = proc("append", stdin='{"type": "note_added", "text": "x"}\n{"type": "nope"}\n')
    assert out.returncode == 3 and out.stderr.count("\n") == 1 and "<stdin>:2" in out.stderr
    assert count(ledger) == 1


def test_a_retraction_is_final_and_a_doubled_id_is_named(ledger: Path) -> None:
    """Retracting a retraction is refused (exit 3; it was stored and did nothing); a batch
    holding one id twice names it (exit 8)."""
    out = run(ledger, "append", "note_added", "-f", "text=x", "--json")
    note = json.loads(out.stdout)[0]["event_id"]
    out = run(
        ledger,
        "append",
        "--json",
        stdin=json.dumps({"type": "event_retracted", "retracted_event_id": note, "reason": "typo"}),
    )
    retraction = json.loads(out.stdout)[0]["event_id"]
    again = run(
        ledger,
        "append",
        stdin=json.dumps(
            {"type": "event_retracted", "retracted_event_id": retraction, "reason": "undo"}
        ),
    )
    assert again.returncode == 3 and "is itself a retraction" in again.stderr
    assert count(ledger) == 2
    event = {"type": "note_added", "event_id": "01900000-0000-7000-8000-0000000000ab", "text": "a"}
    doubled = run(ledger, "append", stdin=json.dumps([event, {**event, "text": "b"}]))
    assert (
        doubled.returncode == 8 and "01900000-0000-7000-8000-0000000000ab twice" in doubled.stderr
    )


def test_sql_json_output_is_strict_json(ledger: Path) -> None:
    """Infinity and NaN are not JSON: `sql --format json` writes null for them (csv: inf)."""
    out = run(
        ledger,
        "sql",
        "SELECT 'inf'::DOUBLE AS a, 'nan'::DOUBLE AS b, 2.5::DOUBLE AS c",
        "--format",
        "json",
    )
    assert out.returncode == 0
    assert json.loads(out.stdout, parse_constant=lambda name: pytest.fail(name)) == [
        {"a": None, "b": None, "c": 2.5}
    ]
