"""A wheel fetched or found by version is the version asked for: a wheel under
``sglang-0.5.23-….whl`` whose METADATA says 9.9.9 (planted in ``TUNELEDGER_WHEELS``, or
renamed) is refused, not recorded as 9.9.9 (docs/reliability.md)."""

from __future__ import annotations

import hashlib
import json
import shutil
import threading
import zipfile
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from ledger.engines.research.analysis import open_engine
from ledger.engines.research.wheels import check_found_wheel
from ledger.errors import InvalidInput


def fake_wheel(folder: Path, file_version: str, metadata_version: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"sglang-{file_version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(
            f"sglang-{file_version}.dist-info/METADATA",
            f"Metadata-Version: 2.1\nName: sglang\nVersion: {metadata_version}\n",
        )
        archive.writestr("sglang/__init__.py", "")
        archive.writestr("sglang/srt/server_args.py", "class ServerArgs:\n    pass\n")
    return wheel


def test_a_wheel_whose_metadata_names_another_version_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    planted = fake_wheel(tmp_path, "0.5.23", "9.9.9")
    monkeypatch.setenv("TUNELEDGER_WHEELS", str(tmp_path))
    with pytest.raises(InvalidInput, match="METADATA says version 9.9.9, sglang==0.5.23 was asked"):
        open_engine("sglang==0.5.23", download=False)
    planted.unlink()
    fake_wheel(tmp_path, "0.5.23", "0.5.23.0")  # the same release, written otherwise
    assert open_engine("sglang==0.5.23", download=False).version == "0.5.23.0"


class RecordedIndex:
    """PyPI's JSON API as recorded for one release, served on localhost: the digest source at
    the seam (``TUNELEDGER_INDEX_JSON``), so the test never depends on the network."""

    def __init__(self, answers: dict[str, dict[str, object]]) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                body = json.dumps(answers[self.path]).encode() if self.path in answers else b""
                self.send_response(200 if body else 404)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def tampered(wheel: Path) -> None:
    """One byte of a stored member changed in place: the zip still opens, METADATA still says
    the version asked for; only the file's hash tells."""
    data = bytearray(wheel.read_bytes())
    at = data.index(b"class ServerArgs")
    data[at] = ord("K")
    wheel.write_bytes(bytes(data))


def test_a_found_wheel_is_checked_against_the_index_hash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A wheel found under a version's file name whose SHA-256 is not the
    one the index publishes for that file is refused in one line (exit 3); the one that is,
    is used with no note; offline, or where the index cannot answer, the wheel is used and
    the research says its hash was not checked."""
    original = fake_wheel(tmp_path / "recorded", "0.5.23", "0.5.23")
    digest = hashlib.sha256(original.read_bytes()).hexdigest()
    index = RecordedIndex(
        {
            "/sglang/0.5.23/json": {
                "info": {"name": "sglang", "version": "0.5.23"},
                "urls": [{"filename": original.name, "digests": {"sha256": digest}}],
            }
        }
    )
    try:
        monkeypatch.setenv("TUNELEDGER_INDEX_JSON", index.url)
        folder = tmp_path / "wheels"
        folder.mkdir()
        monkeypatch.setenv("TUNELEDGER_WHEELS", str(folder))
        copy = folder / original.name
        shutil.copyfile(original, copy)
        assert open_engine("sglang==0.5.23").notes == []  # the published file: no note

        tampered(copy)
        with pytest.raises(InvalidInput) as refused:
            open_engine("sglang==0.5.23")
        line = str(refused.value)
        assert "\n" not in line and refused.value.exit_code == 3
        assert line.startswith(f"{copy}: SHA-256 ") and f"the {digest[:16]}… the index" in line
        assert line.endswith("publishes for this file of sglang==0.5.23: refused")

        (offline,) = open_engine("sglang==0.5.23", download=False).notes
        assert offline == f"{copy}: its SHA-256 was not checked against the index (--offline)"
    finally:
        index.close()
    # the index gone (no network): the wheel is used, the note says why it was not checked
    (unreachable,) = open_engine("sglang==0.5.23").notes
    assert unreachable.startswith(f"{copy}: its SHA-256 could not be checked against the index: ")
    assert "could not be read (ConnectError)" in unreachable
    # a release the index does not list under this file name: a note too (a local build)
    assert check_found_wheel(copy, "sglang", "0.5.23", lambda d, v: {}) == (
        f"{copy}: its SHA-256 could not be checked: the index publishes no file of this name "
        "for sglang==0.5.23"
    )
