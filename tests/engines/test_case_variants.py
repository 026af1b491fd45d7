"""Cases of ../shared/cases read in another of the forms the same fault takes in the field: the
case's input (tests/fixtures/cases/, see its MANIFEST.md) rewritten as another host program or
tool writes it, with the case's right result asserted again."""

from __future__ import annotations

from pathlib import Path

from ledger.importers import import_file
from ledger.store import LedgerStore
from schemas import FindingRecorded, ServerFailed, ServerReady, ServerStarted
from tests.support.cli_inprocess import invoke

CASES = Path(__file__).parents[1] / "fixtures" / "cases"


def python_default_logging(case: str, name: str, tmp_path: Path) -> Path:
    """``case``'s log as a host program re-logs it through Python's ``logging.basicConfig()``
    default format, ``LEVEL:logger:message`` (allenai/olmocr#105's host, in its other spelling)."""
    out = tmp_path / f"pylogging-{name}"
    lines = (CASES / case / name).read_text().splitlines()
    inner = [line.split(" - ", 3)[-1] if " - __main__ - " in line else line for line in lines]
    levels = ["WARNING" if " - WARNING - " in line else "INFO" for line in lines]
    out.write_text(
        "".join(f"{lv}:__main__:{text}\n" for lv, text in zip(levels, inner, strict=True))
    )
    return out


def test_olmocr_105_under_pythons_default_logging_format_is_unwrapped(tmp_path: Path) -> None:
    log = python_default_logging("olmocr-105-wrapped-sglang-log", "server.log", tmp_path)
    assert log.read_text().startswith("INFO:__main__:[2025-03-07 23:50:27 TP0] Automatically")
    events = import_file(log, session_id="s1").events
    started = next(e for e in events if isinstance(e, ServerStarted))
    assert not any(isinstance(e, (ServerReady, ServerFailed)) for e in events)  # never ready
    assert started.startup is not None and started.startup.kv_cache_gb == 2.04
    overrides = {o.flag: o.effective for o in started.startup.overrides}
    assert overrides == {"mem-fraction-static": 0.76, "chunked-prefill-size": None}
    ledger = tmp_path / "l.duckdb"
    LedgerStore(ledger).init()
    out = invoke(["--ledger", str(ledger), "import", str(log)])
    assert out.returncode == 0, out.stderr  # it was refused as "not a known format"
    (run,) = LedgerStore(ledger).query_arrow("SELECT status FROM server_runs").to_pylist()
    assert run["status"] == "starting"


def test_12178_crash_under_pythons_default_logging_keeps_its_root_cause(tmp_path: Path) -> None:
    log = python_default_logging("sglang-12178-fa3-sm120", "server.log", tmp_path)
    events = import_file(log, session_id="s1").events
    failed = next(e for e in events if isinstance(e, ServerFailed))
    assert failed.cause == "crash"
    assert failed.message == (
        "AssertionError: FlashAttention v3 Backend requires SM>=80 and SM<=90. "
        "Please use `--attention-backend flashinfer`."
    )
    crash = next(e for e in events if isinstance(e, FindingRecorded) and e.kind == "crash")
    assert crash.flag == "attention-backend" and crash.verdict == "incompatible"
