"""Small promises: same-content files are two events; --event-id with a batch;
recorded_at never goes backwards in seq order. The CLI runs in this process, on real files."""

from __future__ import annotations

import json
import multiprocessing
import sys
from itertools import pairwise
from pathlib import Path

import pytest

from ledger.cli.main import main
from ledger.store import LedgerStore

ROOT = Path(__file__).resolve().parents[2]
MOE = ROOT / "tests" / "fixtures" / "sglang" / "moe_configs"
H200 = MOE / "triton_3_1_0" / "E=64,N=640,device_name=NVIDIA_H200.json"


def cli(
    capsys: pytest.CaptureFixture[str],
    *args: str,
    stdin: str | None = None,
    monkeypatch: pytest.MonkeyPatch | None = None,
) -> tuple[int, str, str]:
    """Run the CLI in this process: (exit code, stdout, stderr)."""
    if stdin is not None:
        assert monkeypatch is not None
        import io

        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    try:
        main(list(args))
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_two_moe_files_with_the_same_json_are_two_events(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = str(tmp_path / "l.duckdb")
    other_name = tmp_path / "E=64,N=640,device_name=NVIDIA_H200,dtype=fp8_w8a8.json"
    other_folder = tmp_path / "triton_3_2_0" / H200.name
    other_folder.parent.mkdir()
    for copy in (other_name, other_folder):
        copy.write_bytes(H200.read_bytes())
    code, out, err = cli(
        capsys,
        "--ledger",
        ledger,
        "import",
        "--create",
        "--json",
        str(H200),
        str(other_name),
        str(other_folder),
    )
    assert code == 0, err
    assert [row["new"] for row in json.loads(out)] == [1, 1, 1]
    stored = LedgerStore(ledger).read()
    assert sorted((e.file_name, e.triton_version) for e in stored) == sorted(
        [(H200.name, "3.1.0"), (other_name.name, None), (H200.name, "3.2.0")]
    )
    # the same paths again: a no-op; one path twice in a call: stored once
    code, out, err = cli(
        capsys, "--ledger", ledger, "import", "--json", str(H200), str(other_name), str(H200)
    )
    assert code == 0, err
    assert [(row["new"], row["duplicates"]) for row in json.loads(out)] == [(0, 1), (0, 1), (0, 1)]
    assert LedgerStore(ledger).head() == 3


def test_event_id_with_a_batch_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = str(tmp_path / "l.duckdb")
    LedgerStore(ledger).init()
    batch = '{"type": "note_added", "text": "a"}\n{"type": "note_added", "text": "b"}\n'
    event_id = "01a22e2b-6710-715b-8354-f868058572bc"
    code, _, err = cli(
        capsys,
        "--ledger",
        ledger,
        "append",
        "--event-id",
        event_id,
        stdin=batch,
        monkeypatch=monkeypatch,
    )
    assert code == 2 and "--event-id" in err and len(err.splitlines()) == 1
    assert LedgerStore(ledger).head() == 0
    # one event on stdin: the id is used, and a retry is idempotent
    one = '{"type": "note_added", "text": "a"}'
    for _ in range(2):
        code, _, err = cli(
            capsys,
            "--ledger",
            ledger,
            "append",
            "--event-id",
            event_id,
            stdin=one,
            monkeypatch=monkeypatch,
        )
        assert code == 0, err
    assert [str(e.event_id) for e in LedgerStore(ledger).read()] == [event_id]


def _writer(path: str, count: int) -> None:
    from schemas import NoteAdded

    store = LedgerStore(path)
    for i in range(count):
        store.append(NoteAdded(text=f"note {i}"))


def test_recorded_at_never_goes_backwards_in_seq_order(tmp_path: Path) -> None:
    """Three writer processes racing: recorded_at is stamped inside the write transaction."""
    path = str(tmp_path / "l.duckdb")
    LedgerStore(path).init()
    ctx = multiprocessing.get_context("spawn")
    writers = [ctx.Process(target=_writer, args=(path, 40)) for _ in range(3)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(300)
        assert writer.exitcode == 0
    stamps = [e.recorded_at for e in LedgerStore(path).read()]
    assert len(stamps) == 120
    backwards = sum(later < earlier for earlier, later in pairwise(stamps))
    assert backwards == 0
