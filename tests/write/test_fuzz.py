"""Property-based fuzzing of every input path: ``append`` (stdin and -f
options) and ``import`` of each format (sglang bench_serving JSONL, MoE config JSON, SGLang
server log), on real files and a real ledger, the CLI run in this process for speed.

For every generated input: the exit code is 0 or 3, standard error holds at most one line
(never a traceback), and on failure the ledger holds exactly the events it held before.

Inputs are arbitrary JSON values and bytes, event-shaped objects with hostile field values
(nesting thousands deep, integers of thousands of digits or beyond 64 bits, lone surrogates,
huge floats, out-of-range dates), and the fixture files with values swapped for those. The
runs are derandomised (the same cases every run) and bounded: EXAMPLES per test, 8 tests,
so 8 x EXAMPLES cases in all (docs/reliability.md).

Minutes of fuzzing: in the slow set (``make test``, CI), not in ``make check``.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.cli.main import main
from ledger.store import LedgerStore
from schemas import EVENT_TYPES

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "sglang"
BENCH_LINE = json.loads(
    (FIXTURES / "bench_serving" / "with_details.jsonl").read_text().splitlines()[0]
)
MOE_FILE = FIXTURES / "moe_configs" / "triton_3_1_0" / "E=64,N=640,device_name=NVIDIA_H200.json"
LOG_LINES = (FIXTURES / "server" / "sm120_qwen35_baseline.log").read_text().splitlines()

#: Minutes of generated cases: `make test` runs them, `make check` does not.
pytestmark = pytest.mark.slow

#: Cases per test (8 tests); TUNELEDGER_FUZZ_EXAMPLES=N runs more.
EXAMPLES = int(os.environ.get("TUNELEDGER_FUZZ_EXAMPLES", "25"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

HOSTILE = st.one_of(
    st.just("[" * 3000 + "]" * 3000),  # nested too deep (as JSON text)
    st.just("9" * 5000),  # over Python's 4,300-digit limit
    st.sampled_from(
        [
            "9223372036854775808",
            "-9223372036854775809",
            "99999999999999999999",
            "1e20",
            "3e9",
            "-1",
            "0",
            "1e308",
            "-0.0",
            "NaN",
            "Infinity",
            '"\\ud800"',
            '"\\udfff x"',
            '"0001-01-01T00:00:00+05:00"',
            '"9999-12-31T23:59:59-05:00"',
            '"2026-02-30 12:00:00"',
            '["note_added"]',
            "{}",
            "[]",
            "null",
            "true",
            '""',
            '"x"',
        ]
    ),
)
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=20)
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


def value_text(value: Any) -> str:
    return json.dumps(value)


FIELD_VALUE = st.one_of(HOSTILE, JSON_VALUES.map(value_text))


@contextlib.contextmanager
def ledger_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "l.duckdb"
        store = LedgerStore(path)
        store.init()
        yield path


def run(ledger: Path, args: list[str], stdin: bytes = b"") -> tuple[int, str]:
    """The CLI in this process: (exit code, stderr). stdin is raw bytes (may be non-UTF-8)."""
    out, err = io.StringIO(), io.StringIO()
    old_stdin = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main(["--ledger", str(ledger), *args])
            except SystemExit as exc:
                return int(exc.code or 0), err.getvalue()
    finally:
        sys.stdin = old_stdin
    return 0, err.getvalue()  # pragma: no cover - main always exits


def check(ledger: Path, args: list[str], stdin: bytes = b"") -> None:
    before = LedgerStore(ledger).head()
    code, err = run(ledger, args, stdin)
    assert code in (0, 3), (code, err)
    assert len(err.strip().splitlines()) <= 1, err
    assert "Traceback" not in err
    if code != 0:
        assert LedgerStore(ledger).head() == before, err


def splice(template: dict[str, Any], key: str, raw: str) -> str:
    """``template`` as JSON with ``key``'s value replaced by the raw JSON text ``raw``."""
    marker = "__FUZZ_MARKER__"
    return json.dumps({**template, key: marker}).replace(json.dumps(marker), raw)


@pytest.fixture(scope="module")
def ledger() -> Iterator[Path]:
    with ledger_dir() as path:
        yield path


@FUZZ
@given(data=st.one_of(st.binary(max_size=200), JSON_VALUES.map(lambda v: json.dumps(v).encode())))
def test_append_any_bytes_or_json(ledger: Path, data: bytes) -> None:
    check(ledger, ["append"], data)


EVENT_TYPE = st.one_of(st.sampled_from(sorted(EVENT_TYPES)), st.text(max_size=10))
ENVELOPE_KEYS = [
    "text",
    "recorded_at",
    "seq",
    "stream_version",
    "event_id",
    "causation_id",
    "session_id",
    "host",
    "refs",
    "schema_version",
    "source",
    "actor",
]


@FUZZ
@given(
    type_name=EVENT_TYPE,
    key=st.sampled_from(ENVELOPE_KEYS),
    raw=FIELD_VALUE,
    lines=st.integers(1, 3),
)
def test_append_event_shaped_objects(
    ledger: Path, type_name: str, key: str, raw: str, lines: int
) -> None:
    line = splice({"type": type_name, "text": "fuzz", "session_id": "fuzz"}, key, raw)
    check(ledger, ["append"], ("\n".join([line] * lines)).encode("utf-8", "surrogatepass"))


@FUZZ
@given(
    type_name=EVENT_TYPE,
    key=st.text(min_size=1, max_size=12),
    raw=FIELD_VALUE,
    option=st.sampled_from(
        [
            "--causation",
            "--correlation",
            "--event-id",
            "--session",
            "--stream",
            "--source",
            "--host",
        ]
    ),
    option_value=st.text(max_size=40),
)
def test_append_from_options(
    ledger: Path, type_name: str, key: str, raw: str, option: str, option_value: str
) -> None:
    check(
        ledger, ["append", type_name, "-f", f"{key}={raw}", "-f", "text=fuzz", option, option_value]
    )


@FUZZ
@given(key=st.sampled_from(sorted(BENCH_LINE)), raw=FIELD_VALUE, drop=st.booleans())
def test_import_bench_serving_with_a_field_swapped(
    ledger: Path, tmp_path_factory: pytest.TempPathFactory, key: str, raw: str, drop: bool
) -> None:
    line = (
        json.dumps({k: v for k, v in BENCH_LINE.items() if k != key})
        if drop
        else splice(BENCH_LINE, key, raw)
    )
    path = tmp_path_factory.mktemp("bench") / "bench.jsonl"
    path.write_bytes(line.encode("utf-8", "surrogatepass") + b"\n")
    check(ledger, ["import", str(path)])


@FUZZ
@given(
    batch=st.sampled_from(sorted(json.loads(MOE_FILE.read_text()))),
    key=st.sampled_from(
        [
            "BLOCK_SIZE_M",
            "BLOCK_SIZE_N",
            "BLOCK_SIZE_K",
            "GROUP_SIZE_M",
            "num_warps",
            "num_stages",
            "extra",
        ]
    ),
    raw=FIELD_VALUE,
)
def test_import_moe_config_with_an_entry_swapped(
    ledger: Path, tmp_path_factory: pytest.TempPathFactory, batch: str, key: str, raw: str
) -> None:
    configs = json.loads(MOE_FILE.read_text())
    text = json.dumps({**configs, batch: {**configs[batch], key: "__FUZZ_MARKER__"}}).replace(
        '"__FUZZ_MARKER__"', raw
    )
    folder = tmp_path_factory.mktemp("moe") / "triton_3_1_0"
    folder.mkdir()
    path = folder / MOE_FILE.name
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    check(ledger, ["import", str(path)])


NUMBERS = st.one_of(
    st.integers(-(10**6), 10**30).map(str),
    st.sampled_from(["-1", "0", "1e309", "nan", "x", "", "None", "'1'"]),
)


@FUZZ
@given(
    index=st.integers(0, len(LOG_LINES) - 1),
    value=NUMBERS,
    cut=st.integers(0, 400),
    truncate=st.booleans(),
)
def test_import_server_log_with_a_number_swapped(
    ledger: Path,
    tmp_path_factory: pytest.TempPathFactory,
    index: int,
    value: str,
    cut: int,
    truncate: bool,
) -> None:
    import re

    lines = list(LOG_LINES)
    numbers = list(re.finditer(r"\d+(?:\.\d+)?", lines[index]))
    if numbers:
        match = numbers[cut % len(numbers)]
        lines[index] = lines[index][: match.start()] + value + lines[index][match.end() :]
    if truncate:
        lines[index] = lines[index][:cut]
    path = tmp_path_factory.mktemp("log") / "server.log"
    path.write_text("\n".join(lines) + "\n")
    check(ledger, ["import", str(path)])


@FUZZ
@given(
    data=st.binary(max_size=300),
    name=st.sampled_from(["x.jsonl", "x.json", "x.log", MOE_FILE.name]),
)
def test_import_any_bytes(
    ledger: Path, tmp_path_factory: pytest.TempPathFactory, data: bytes, name: str
) -> None:
    path = tmp_path_factory.mktemp("any") / name
    path.write_bytes(data)
    check(ledger, ["import", str(path)])


def _other_tool_files() -> list[Path]:
    """The importable fixtures of the other tools' importers (vLLM bench and logs, GuideLLM,
    llmperf, AIPerf, vLLM MoE configs), as test_importers_other_tools lists them."""
    from tests.support.other_tools import IMPORTABLE

    return [path for path, _, _ in IMPORTABLE]


OTHER_FILES = _other_tool_files()


@FUZZ
@given(
    which=st.integers(0, len(OTHER_FILES) - 1),
    pick=st.integers(0, 10**6),
    value=st.one_of(NUMBERS, HOSTILE),
)
def test_import_other_tools_with_a_number_swapped(
    ledger: Path, tmp_path_factory: pytest.TempPathFactory, which: int, pick: int, value: str
) -> None:
    import re

    source = OTHER_FILES[which]
    text = source.read_text(encoding="utf-8")
    numbers = list(re.finditer(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?", text))
    if numbers:
        match = numbers[pick % len(numbers)]
        text = text[: match.start()] + value + text[match.end() :]
    folder = (
        tmp_path_factory.mktemp("other") / source.parent.name
    )  # the folder name may matter (triton_*)
    folder.mkdir()
    path = folder / source.name
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    check(ledger, ["import", str(path)])
