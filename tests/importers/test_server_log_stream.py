"""A served SGLang log past the 256 MiB of a result file is read as a stream, in bounded memory
(docs/reliability.md, "Server log import speed and memory"): a real ``tuneledger import`` under
an address-space limit far below what holding the log would take imports it with every decode
line counted, and the events of a log read as a stream are those of the same log read whole.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.errors import InvalidInput
from ledger.importers import detect, import_file
from ledger.input_files import HEAD_BYTES, LIMITS
from tests.importers.test_server_log_memory import STARTUP, import_and_count, write_served_log

#: The address space of the importing process: the interpreter, DuckDB and pyarrow take most of
#: it; a 257 MiB log read whole (its text, its lines, a ``LogLine`` each) does not fit beside them.
ADDRESS_SPACE = 1536 << 20


def _write_big_log(path: Path, size: int) -> int:
    """A real startup, then one block of four ranks' decode lines (each with an accept length)
    and access lines written again and again until ``size`` bytes; the number of decode lines.
    The block's times rise within it and start again at each repeat: the log runs forward
    (``lines.runs_backwards`` sees times rise)."""
    block_file = path.with_name("block.log")
    block_decodes = write_served_log(block_file, 1_000_000)
    head_lines = sum(
        1
        for line in STARTUP.read_text(encoding="utf-8").splitlines()
        if "Decode batch" not in line and "Prefill batch" not in line
    )
    lines = block_file.read_text(encoding="utf-8").splitlines(keepends=True)
    block_file.unlink()
    head, block = "".join(lines[:head_lines]), "".join(lines[head_lines:]).encode()
    decodes = 0
    with path.open("wb") as out:
        out.write(head.encode())
        while out.tell() < size:
            out.write(block)
            decodes += block_decodes
    return decodes


@pytest.mark.slow  # a real process fed 257 MiB: a minute of CPU
def test_a_server_log_past_256_mib_imports_as_a_stream_under_a_memory_limit(
    tmp_path: Path,
) -> None:
    log = tmp_path / "served.log"
    decodes = _write_big_log(log, LIMITS["result"] + (1 << 20))
    assert log.stat().st_size > LIMITS["result"]
    import_and_count(tmp_path, log, decodes, ADDRESS_SPACE)
    assert decodes > 1_000_000


def test_a_log_read_as_a_stream_gives_the_events_of_the_log_read_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same 2 MB log read whole and, past a lowered ``STREAM_FROM``, as a stream: the same
    events, id for id (the hash read through is the hash of the bytes read whole)."""
    log = tmp_path / "served.log"
    write_served_log(log, 2_000_000)
    whole = import_file(log)
    monkeypatch.setattr(detect, "STREAM_FROM", 1 << 20)
    streamed = import_file(log)
    assert [e.model_dump(mode="json") for e in streamed.events] == [
        e.model_dump(mode="json") for e in whole.events
    ]
    assert any(e.type == "spec_decoding_trial_completed" for e in streamed.events)
    assert detect.read_input(log).streamed and len(detect.read_input(log).text) <= HEAD_BYTES


def test_a_streamed_log_whose_lines_run_newest_first_is_read_whole_under_the_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A log turned round (a cloud export, newest first) is read whole as before; past a result
    file's bound it is refused in one line; past the bound a file that is no SGLang server log
    by its head is refused as before."""
    lines = STARTUP.read_text(encoding="utf-8").splitlines()
    newest_first = tmp_path / "export.log"
    newest_first.write_text("\n".join(reversed(lines)) + "\n", encoding="utf-8")
    whole = import_file(newest_first)
    monkeypatch.setattr(detect, "STREAM_FROM", 1000)
    assert detect.read_input(newest_first).streamed
    assert [e.model_dump(mode="json") for e in import_file(newest_first).events] == [
        e.model_dump(mode="json") for e in whole.events
    ]
    other = tmp_path / "bench.jsonl"
    other.write_text('{"completed": 1}\n' * 100_000, encoding="utf-8")
    monkeypatch.setitem(LIMITS, "result", 2000)
    with pytest.raises(InvalidInput, match="lines run newest first: it is read whole, up to"):
        import_file(newest_first)
    with pytest.raises(InvalidInput, match="too large .*: a result file is read up to 2000 bytes"):
        import_file(other)
