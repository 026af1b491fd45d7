"""Each malformed input that once crashed with a traceback: now one line, exit 3,
naming the input (file:line or stdin) and the field, with nothing appended. The CLI runs in this
process on a real ledger; the SGLang-log-specific cases are in tests/engines/test_sglang_log.py."""

from __future__ import annotations

import io
import json
import sys
import warnings
from pathlib import Path

import duckdb
import pytest

from ledger.cli.main import main
from ledger.store import LedgerStore
from schemas import NoteAdded

DEEP = "[" * 3000 + "]" * 3000


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    path = tmp_path / "l.duckdb"
    LedgerStore(path).append(NoteAdded(text="before"))
    return path


def run(ledger: Path, args: list[str], stdin: bytes = b"") -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    old = sys.stdin, sys.stdout, sys.stderr
    sys.stdin, sys.stdout, sys.stderr = (
        io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"),
        out,
        err,
    )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a pydantic serializer warning is a failure too
            main(["--ledger", str(ledger), *args])
    except SystemExit as exc:
        return int(exc.code or 0), err.getvalue()
    finally:
        sys.stdin, sys.stdout, sys.stderr = old
    return 0, err.getvalue()  # pragma: no cover


def bench_line(**override: object) -> str:
    line = {
        "completed": 1,
        "duration": 1.0,
        "request_throughput": 1.0,
        "output_throughput": 1.0,
        "input_lens": [10],
        "output_lens": [5],
        "ttfts": [0.1],
        "itls": [[]],
        "generated_texts": [""],
        "errors": [""],
    }
    return json.dumps({**line, **override})


STDIN_CASES = {
    "nested 3,000 deep": (
        '{"type": "note_added", "text": "x", "refs": ' + DEEP + "}",
        "<stdin>:1: JSON nested too deeply",
    ),
    "an integer of 5,000 digits": (
        '{"type": "note_added", "text": "x", "n": ' + "9" * 5000 + "}",
        "<stdin>:1: Exceeds the limit",
    ),
    "a lone surrogate": (
        '{"type": "note_added", "text": "\\ud800"}',
        "field 'text': not valid Unicode text",
    ),
    "a type that is a list": ('{"type": ["note_added"]}', "field 'type': expected a string"),
    "recorded_at out of range": (
        '{"type": "note_added", "text": "x", "recorded_at": "0001-01-01T00:00:00+05:00"}',
        "field 'recorded_at'",
    ),
    "an integer beyond BIGINT": (
        '{"type": "server_started", "run_id": "r", "engine": "sglang", "config_name": "c", '
        '"port": 99999999999999999999}',
        "field 'port': integer 99999999999999999999 is beyond 64 bits",
    ),
    "a host integer beyond BIGINT": (
        '{"type": "host_observed", "host": {"gpu_count": 9223372036854775808}}',
        "field 'host.gpu_count'",
    ),
}


@pytest.mark.parametrize("case", STDIN_CASES, ids=list(STDIN_CASES))
def test_malformed_stdin_is_one_line_exit_3(ledger: Path, case: str) -> None:
    text, expected = STDIN_CASES[case]
    # as a runner: some cases are runners' event types (a person's append refuses those)
    code, err = run(ledger, ["--actor", "runner:test", "append"], text.encode())
    assert code == 3 and len(err.splitlines()) == 1 and expected in err, err
    assert LedgerStore(ledger).head() == 1


def test_non_utf8_stdin_names_the_line_and_byte(ledger: Path) -> None:
    code, err = run(
        ledger,
        ["append"],
        b'{"type": "note_added", "text": "ok"}\n{"type": "note_added", "text": "\xff"}',
    )
    assert code == 3 and "<stdin>:2: not UTF-8 text (byte 69)" in err and len(err.splitlines()) == 1
    assert LedgerStore(ledger).head() == 1


@pytest.mark.parametrize(
    ("option", "value"), [("--causation", "zzz"), ("--correlation", "12"), ("--event-id", "x")]
)
def test_a_bad_envelope_option_is_named_without_a_warning(
    ledger: Path, option: str, value: str
) -> None:
    code, err = run(ledger, ["append", "note_added", "-f", "text=x", option, value])
    assert (
        code == 3
        and err.startswith(f"tuneledger: error: {option}")
        or (option == "--event-id" and "event_id" in err)
    )
    assert len(err.splitlines()) == 1 and LedgerStore(ledger).head() == 1


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ({"input_lens": [3e9]}, "field 'input_lens[0]': expected a token count"),
        ({"output_lens": [1e20]}, "field 'output_lens[0]': expected a token count"),
        ({"completed": 99999999999999999999}, "beyond 64 bits"),
        # a null gap multiplied None by the seconds->ms scale (a traceback, exit 1)
        ({"itls": [[0.01, None]], "output_lens": [3]}, "field 'itls[0][1]': expected a number"),
    ],
)
def test_bench_values_out_of_range_are_named(
    ledger: Path, tmp_path: Path, override: dict, expected: str
) -> None:
    path = tmp_path / "bench.jsonl"
    path.write_text(bench_line(**override) + "\n")
    code, err = run(ledger, ["import", str(path)])
    assert (
        code == 3 and len(err.splitlines()) == 1 and expected in err and "bench.jsonl:1" in err
    ), err
    assert LedgerStore(ledger).head() == 1


@pytest.mark.parametrize("name", ["bench.jsonl", "E=8,N=16,device_name=NVIDIA_H200.json"])
def test_deeply_nested_files_are_one_line(ledger: Path, tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_text(
        '{"completed": 1, "duration": 1.0, "request_throughput": 1, "x": ' + DEEP + "}\n"
    )
    code, err = run(ledger, ["import", str(path)])
    assert code == 3 and "JSON nested too deeply" in err and len(err.splitlines()) == 1


def test_deeply_nested_yaml_is_one_line(ledger: Path, tmp_path: Path) -> None:
    """The YAML sniff (GuideLLM's YAML report) recursed out of the stack (found by
    test_fuzz.py's number swap): now an unknown format, one line, exit 3."""
    path = tmp_path / "benchmarks.yaml"
    path.write_text("benchmarks: " + DEEP + "\n")
    code, err = run(ledger, ["import", str(path)])
    assert code == 3 and len(err.splitlines()) == 1 and "benchmarks.yaml" in err, err
    assert LedgerStore(ledger).head() == 1


def test_a_stored_event_of_an_unknown_type_is_one_line(ledger: Path) -> None:
    con = duckdb.connect(str(ledger))
    con.execute(
        "INSERT INTO events (seq, event_id, type, schema_version, stream, stream_version, recorded_at, "
        "actor_kind, actor_name, payload) VALUES (2, '01a22e2b-6710-715b-8354-f868058572bc', 'future_thing', "
        "1, 'ledger', 2, now(), 'person', 'x', '{}')"
    )
    con.close()
    for args in (["events", "--format", "json"], ["show", "01a22e2b-6710-715b-8354-f868058572bc"]):
        code, err = run(ledger, args)
        assert code == 3 and len(err.splitlines()) == 1
        assert "seq 2" in err and "'future_thing'" in err and "unknown event type" in err


def test_an_error_quoting_input_with_line_breaks_stays_one_line(ledger: Path) -> None:
    code, err = run(ledger, ["append", "note_added", "-f", "\r=" + DEEP])
    assert code == 3 and len(err.splitlines()) == 1 and "\\r" in err
