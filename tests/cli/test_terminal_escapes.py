"""Stored text never drives the terminal that shows it (docs/reliability.md).

A note holding a title-setting OSC sequence, a clear-screen CSI, an 8-bit CSI (0x9B), a
carriage return, a right-to-left override and rich markup is stored as given; every
human-readable output (``events`` as a table and CSV, ``sql`` as a table, CSV and JSON,
``show``, the Markdown export, ``import``'s report) shows it with the control characters
escaped and the markup as text.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ledger.read.shown_text import escape_controls
from ledger.store import LedgerStore
from schemas import NoteAdded, SessionStarted
from tests.support.cli_inprocess import invoke

HOSTILE = "hi \x1b]0;pwned\x07\x1b[2J\x9b31m over\rwritten \u202ereversed [link=https://evil.example]click[/link]"
#: Any control character a terminal acts on (tab and newline are layout, not commands).
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    path = tmp_path / "l.duckdb"
    LedgerStore(path).append(NoteAdded(text=HOSTILE, session_id="s1"))
    return path


def cli(ledger: Path, *args: str) -> str:
    done = invoke(["--ledger", ledger, *args])
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_stored_text_is_kept_as_given(ledger: Path) -> None:
    (event,) = LedgerStore(ledger).read()
    assert isinstance(event, NoteAdded) and event.text == HOSTILE


@pytest.mark.parametrize(
    "args",
    [
        ("events",),
        ("events", "--format", "csv"),
        ("sql", "SELECT payload->>'text' AS text FROM events"),
        ("sql", "SELECT payload->>'text' AS text FROM events", "--format", "csv"),
        ("sql", "SELECT payload->>'text' AS \"\x1b[2Jcol\" FROM events", "--format", "csv"),
        ("sql", "SELECT payload->>'text' AS text FROM events", "--format", "json"),
        ("events", "--format", "json"),
    ],
)
def test_control_characters_are_escaped_in_every_output(ledger: Path, args: tuple[str]) -> None:
    out = cli(ledger, *args)
    assert RAW_CONTROL.search(out) is None, repr(out)
    assert "pwned" in out


def test_tables_and_csv_show_the_escapes_and_the_markup_as_text(ledger: Path) -> None:
    for args in (("events",), ("sql", "SELECT payload->>'text' AS text FROM events")):
        out = cli(ledger, *args, "--format", "csv")
        assert "\\x1b]0;pwned\\x07\\x1b[2J\\x9b31m over\\rwritten \\u202ereversed" in out
        assert "[link=https://evil.example]click[/link]" in out
    table = cli(ledger, "sql", "SELECT payload->>'text' AS text FROM events")
    assert "[link=https://evil.example]click[/link]" in table  # markup shown, not applied


def test_json_output_keeps_the_text_exactly(ledger: Path) -> None:
    (row,) = json.loads(
        cli(ledger, "sql", "SELECT payload->>'text' AS text FROM events", "--format", "json")
    )
    assert row["text"] == HOSTILE


def test_show_escapes_the_linked_events_summaries(ledger: Path, tmp_path: Path) -> None:
    (event,) = LedgerStore(ledger).read()
    LedgerStore(ledger).append(
        NoteAdded(text="re \x1b[2J", session_id="s1", causation_id=event.event_id)
    )
    out = cli(ledger, "show", str(event.event_id))
    assert RAW_CONTROL.search(out) is None and "re \\x1b[2J" in out


def test_escape_controls() -> None:
    assert escape_controls("plain text\nnext\tline") == "plain text\nnext\tline"
    assert escape_controls("a\nb", one_line=True) == "a\\nb"
    assert escape_controls("\x1b[2J\x07\x7f\x9b\u202e") == "\\x1b[2J\\x07\\x7f\\x9b\\u202e"
    assert escape_controls("naïve 日本 ✓") == "naïve 日本 ✓"


def test_the_decision_log_escapes_what_it_shows(tmp_path: Path) -> None:
    # a note is only counted in the decision log; a session's title is shown
    path = tmp_path / "l.duckdb"
    LedgerStore(path).append(SessionStarted(title=HOSTILE, session_id="s1"))
    out = cli(path, "export", "markdown")
    assert RAW_CONTROL.search(out) is None, repr(out)
    assert "pwned" in out
