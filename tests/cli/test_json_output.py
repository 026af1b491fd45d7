"""Output for programs (docs/cli.md): every command with ``--json`` prints exactly one JSON
document on stdout, of the documented shape (rows: one array of objects; a single result: one
object), and a refused call with ``--json`` prints exactly one JSON object on stderr, the MCP
tool errors' ``{"error": {"exit_code", "meaning", "message"}}``, with the documented exit code.

The measuring commands' successes need real servers: the slow tests that start one check them
(``test_bench_config_name``, ``test_plan_campaigns``, ``test_spec``); here, their refusals and
``run plan --dry-run``."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger.cli.commands.append import REFUSED_FIELDS
from ledger.errors import EXIT_MEANINGS
from tests.support.cli_inprocess import invoke

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
APPENDED = {"event_id", "seq", "stream", "stream_version", "duplicate"}

#: (command line, "array" or "object", keys every row / the object has). ``{event}`` is a
#: stored note's id.
SUCCEEDS = [
    (["append", "note_added", "-f", "text=again", "--json"], "array", APPENDED),
    (["events", "--json"], "array", {"event_id", "seq", "type", "actor"}),
    (["events", "--format", "json", "--type", "note_added"], "array", {"text"}),
    (["show", "{event}", "--json"], "object", {"event", "linked"}),
    (["show", "{event}", "--format", "json"], "object", {"event", "linked"}),
    (["sql", "SELECT seq, type FROM events", "--json"], "array", {"seq", "type"}),
    (["sql", "SELECT seq FROM events", "--format", "json"], "array", {"seq"}),
    (["types", "--json"], "array", {"type", "description", "schema"}),
    (["types", "note_added", "--json"], "object", {"properties", "required", "$id"}),
    (["views", "--json"], "array", {"view", "columns"}),
    (["compare", "repeats", "--json"], "object", {"metric", "groups"}),
    (["compare", "pareto", "--format", "json"], "object", {"latency_metric", "points"}),
    (["remote", "list", "--json"], "array", set()),
    (
        ["run", "server", "show", "--configs", str(EXAMPLES / "servers.toml"), "--json"],
        "array",
        {"name", "engine", "argv"},
    ),  # fmt: skip
    (
        [
            "run",
            "server",
            "show",
            "baseline",
            "--configs",
            str(EXAMPLES / "servers.toml"),
            "--json",
        ],
        "object",
        {"name", "engine", "argv"},
    ),  # fmt: skip
    (
        ["run", "plan", str(EXAMPLES / "plan.toml"), "--dry-run", "--json"],
        "object",
        {"plan", "arms", "starts", "server_starts", "estimate_s"},
    ),  # fmt: skip
]

#: (command line, exit code): each refused before it does anything.
REFUSED = [
    (["append", "note_added", "-f", "txt=x", "--json"], 3),
    (["events", "--type", "nope", "--json"], 3),
    (["events", "--json", "--format", "csv"], 2),  # --json and --format csv disagree
    (["show", "0000000000", "--json"], 5),
    (["sql", "DROP VIEW board", "--json"], 6),
    (["sql", "SELECT 1", "--format", "json", "--max-rows", "0"], 2),
    (["types", "nope", "--json"], 3),
    (["import", "{missing}", "--json"], 5),
    (["compare", "diff", "nope", "other", "--json"], 5),
    (["sync", "--json"], 5),
    (["research", "--arch", "sm90", "--json"], 2),
    (["run", "server", "show", "nope", "--configs", str(EXAMPLES / "servers.toml"), "--json"], 3),
    (["run", "server", "start", "nope", "--configs", str(EXAMPLES / "servers.toml"), "--json"], 3),
    (["run", "bench", "--json"], 2),  # no --url
    (
        [
            "run",
            "bench",
            "--url",
            "http://127.0.0.1:9",
            "--model",
            "m",
            "--config-name",
            "x",
            "--no-progress",
            "--json",
        ],
        13,
    ),  # fmt: skip
    (["run", "plan", "{missing}", "--json"], 5),
    (["run", "spec", "{missing}", "--json"], 5),
    (["run", "tune", "--dtype", "bf16", "--block-shape", "1,2", "--json"], 2),
]


@pytest.fixture(autouse=True)
def _sigterm_kept() -> Iterator[None]:
    """``run bench`` in this process sets its SIGTERM handler (Ctrl-C's way): put it back."""
    before = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, before)


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    path = tmp_path_factory.mktemp("json") / "l.duckdb"
    assert invoke(["--ledger", path, "init"]).returncode == 0
    out = invoke(["--ledger", path, "--session", "s", "append", "note_added", "-f", "text=hi", "--json"])  # fmt: skip
    return path, json.loads(out.stdout)[0]["event_id"]


def _args(args: list[str], ledger: tuple[Path, str], tmp_path: Path) -> list[str]:
    path, event = ledger
    missing = str(tmp_path / "missing.toml")
    filled = [a.format(event=event, missing=missing) if "{" in a else a for a in args]
    return ["--ledger", str(path), "--session", "s", *filled]


@pytest.mark.parametrize(
    ("args", "shape", "keys"), SUCCEEDS, ids=[" ".join(c[0][:3]) for c in SUCCEEDS]
)
def test_json_output_is_one_document_of_the_documented_shape(
    ledger: tuple[Path, str], tmp_path: Path, args: list[str], shape: str, keys: set[str]
) -> None:
    out = invoke(_args(args, ledger, tmp_path))
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)  # the whole of stdout is one document
    if shape == "array":
        assert isinstance(doc, list) and all(isinstance(row, dict) for row in doc)
        assert all(keys <= set(row) for row in doc), (keys, doc[:1])
        if keys:
            assert doc, "rows expected"
    else:
        assert isinstance(doc, dict) and keys <= set(doc), (keys, list(doc))


@pytest.mark.parametrize(("args", "code"), REFUSED, ids=[" ".join(c[0][:3]) for c in REFUSED])
def test_a_refused_call_with_json_is_one_json_error_on_stderr(
    ledger: tuple[Path, str], tmp_path: Path, args: list[str], code: int
) -> None:
    out = invoke(_args(args, ledger, tmp_path))
    assert out.returncode == code, out.stderr
    assert out.stdout == "" and out.stderr.count("\n") == 1, out.stderr
    error = json.loads(out.stderr)["error"]
    assert set(error) == {"exit_code", "meaning", "message"}
    assert error["exit_code"] == code and error["meaning"] == EXIT_MEANINGS[code]
    assert error["message"] and "\n" not in error["message"]


def test_types_json_is_the_validators_schema() -> None:
    """``types --json`` is generated from the JSON Schema the validator uses, for every type."""
    from schemas import EVENT_TYPES
    from schemas.jsonschema import schema_of

    listed = json.loads(invoke(["types", "--json"]).stdout)
    assert [row["type"] for row in listed] == sorted(EVENT_TYPES)
    for row in listed:
        assert row["schema"] == schema_of(row["type"])
        one = json.loads(invoke(["types", row["type"], "--json"]).stdout)
        assert one == row["schema"]


def test_views_json_names_each_views_columns_as_the_text_does(ledger: tuple[Path, str]) -> None:
    path, _ = ledger
    views = json.loads(invoke(["--ledger", path, "views", "--json"]).stdout)
    text = invoke(["--ledger", path, "views"]).stdout.splitlines()
    assert [f"{v['view']}: " + ", ".join(c["name"] for c in v["columns"]) for v in views] == text
    board = next(v for v in views if v["view"] == "board")
    assert {"name": "candidate_id", "type": "VARCHAR"} in board["columns"]


def test_events_json_is_one_array_that_append_reads_back(
    ledger: tuple[Path, str], tmp_path: Path
) -> None:
    """``events --json`` was JSON lines while ``sql --format json`` was an array: now both are
    one array; an empty result is ``[]``, and the array is what ``append`` takes on stdin."""
    path, event = ledger
    out = invoke(["--ledger", path, "events", "--json", "--type", "note_added", "--limit", "1"])
    (row,) = json.loads(out.stdout)
    assert row["event_id"] == event and row["text"] == "hi"
    none = invoke(["--ledger", path, "events", "--json", "--type", "session_ended"])
    assert json.loads(none.stdout) == []
    copy = tmp_path / "copy.duckdb"
    invoke(["--ledger", copy, "init"])
    # less what the ledger sets (the actor is the appender's, recorded_at the store's clock)
    rows = [{k: v for k, v in r.items() if k not in REFUSED_FIELDS} for r in json.loads(out.stdout)]
    again = invoke(["--ledger", copy, "append", "--json"], stdin=json.dumps(rows))
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)[0]["event_id"] == event


def test_without_json_an_error_stays_the_text_line(tmp_path: Path) -> None:
    out = invoke(["--ledger", tmp_path / "none.duckdb", "show", "0000000000"])
    assert out.returncode == 5 and out.stderr.startswith("tuneledger: error: ")
