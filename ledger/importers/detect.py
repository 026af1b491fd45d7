"""Read an input file and tell which format it is, by its content (and, for MoE configs, its name).

Known formats:

- ``sglang-bench-serving``: JSON Lines written by ``python -m sglang.bench_serving
  --output-file`` (REFERENCE section 4): one result object per line.
- ``sglang-moe-config``: a fused-MoE Triton config (REFERENCE section 3): a JSON
  object mapping batch sizes to ``{BLOCK_SIZE_M, ...}``, named ``E=..,N=..,device_name=...json``.
- ``sglang-server-log``: SGLang server output with ``[YYYY-mm-dd HH:MM:SS ...]`` lines
  (REFERENCE section 2).

Anything else is ``InvalidInput`` naming the file.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import UUID, uuid5

from ledger.errors import InvalidInput
from ledger.input_checks import loads
from ledger.safe_files import read_regular
from ledger.sglang_log import LOG_MARKERS

BENCH = "sglang-bench-serving"
MOE = "sglang-moe-config"
SERVER_LOG = "sglang-server-log"

EXPECTED = "expected sglang bench_serving JSONL, sglang MoE config JSON or sglang server log"

#: Fixed namespace of imported event ids: uuid5(this, sha256(file) + ":" + label).
IMPORT_NAMESPACE = UUID("5b0c1e7a-8f1d-4c2e-9a57-3d6f0b2a9e41")

#: Keys of every sglang bench_serving result line (0.5.x); three of them make a line one.
BENCH_KEYS = frozenset(
    {"completed", "duration", "request_throughput", "output_throughput", "mean_ttft_ms", "mean_e2e_latency_ms",
     "total_output_tokens", "total_output", "max_concurrency"}
)

MOE_NAME_RE = re.compile(r"^E=\d+,N=\d+,device_name=")
_LOG_PREFIX_RE = re.compile(r"^\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}")


@dataclass(frozen=True)
class InputFile:
    """A file read for import: its ``path``, UTF-8 ``text`` and content ``sha256`` (hex).

    ``scope`` (the session id imported into) is part of every derived event id:
    the same file imported into two sessions gives two sets of events, while a
    re-import into the same session gives the same ids (an idempotent no-op).
    """

    path: Path
    text: str
    sha256: str
    scope: str = ""

    @property
    def name(self) -> str:
        """The file name, used in ``source`` (``name:line``) and messages."""
        return self.path.name

    @property
    def label(self) -> str:
        """The path as the user gave it, for error messages."""
        return str(self.path)

    def event_id(self, label: str) -> UUID:
        """A deterministic event id: the same file content and label give the same id."""
        scope = f"{self.scope}:" if self.scope else ""
        return uuid5(IMPORT_NAMESPACE, f"{self.sha256}:{scope}{label}")

    def lines(self) -> list[str]:
        """The text split into lines (no line ends); line ``n`` is ``lines()[n - 1]``."""
        return self.text.splitlines()


def read_input(path: str | Path) -> InputFile:
    """Read ``path`` as UTF-8 text.

    Raises:
        NotFound: no such file.
        InvalidInput: a directory, a FIFO, a device or anything but a regular file, an empty file, or bytes that are not UTF-8 text
            (named with the line of the first bad byte).
    """
    path = Path(path)
    try:
        data = read_regular(path)  # a FIFO or /dev/zero is refused at once, never read
    except InvalidInput as exc:
        raise InvalidInput(f"{exc} ({EXPECTED})") from None
    if not data.strip():
        raise InvalidInput(f"{path}: empty file ({EXPECTED})")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InvalidInput(f"{path}:{line}: not UTF-8 text (byte {exc.start}); {EXPECTED}") from None
    if "\x00" in text:
        line = text[: text.index("\x00")].count("\n") + 1
        raise InvalidInput(f"{path}:{line}: binary data (NUL byte); {EXPECTED}")
    return InputFile(path=path, text=text, sha256=hashlib.sha256(data).hexdigest())


def looks_like_bench(obj: Any) -> bool:
    """True for a JSON object with at least three sglang bench_serving result keys."""
    return isinstance(obj, dict) and len(BENCH_KEYS & obj.keys()) >= 3


def looks_like_moe(obj: Any) -> bool:
    """True for a JSON object whose values are objects with ``BLOCK_SIZE_M``."""
    return (
        isinstance(obj, dict)
        and bool(obj)
        and all(isinstance(v, dict) for v in obj.values())
        and any("BLOCK_SIZE_M" in v for v in obj.values())
    )


def detect_format(file: InputFile) -> str:
    """The format of ``file``: ``BENCH``, ``MOE`` or ``SERVER_LOG``.

    Raises:
        InvalidInput: not a known format; a file that claims JSON (``.json``/``.jsonl``,
            or a MoE config name) whose first object does not parse is named with its line.
    """
    stripped = file.text.lstrip()
    moe_name = bool(MOE_NAME_RE.match(file.name))
    # A log line starts with "[2026-..." too: only a "[" that is not SGLang's prefix means JSON.
    if stripped.startswith("{") or (stripped.startswith("[") and not _LOG_PREFIX_RE.match(stripped)):
        try:
            whole = loads(file.text, file.label)
        except json.JSONDecodeError as exc:
            whole, whole_error = None, exc
        else:
            whole_error = None
        if whole_error is None:
            if moe_name or looks_like_moe(whole):
                return MOE
            if looks_like_bench(whole):
                return BENCH
            raise _unknown(file)
        if moe_name:
            raise InvalidInput(
                f"{file.label}:{whole_error.lineno}: not valid JSON ({whole_error.msg} at column {whole_error.colno})"
            )
        # Not one JSON document: JSON Lines? The first non-blank line decides.
        for number, line in enumerate(file.lines(), start=1):
            if not line.strip():
                continue
            try:
                first = loads(line, f"{file.label}:{number}")
            except json.JSONDecodeError as exc:
                if file.path.suffix.lower() in (".jsonl", ".json", ".ndjson"):
                    raise InvalidInput(
                        f"{file.label}:{number}: not valid JSON ({exc.msg} at column {exc.colno})"
                    ) from None
                raise _unknown(file) from None
            if looks_like_bench(first):
                return BENCH
            raise _unknown(file)
    if is_server_log(file.text):
        return SERVER_LOG
    raise _unknown(file)


def is_server_log(text: str, scan_lines: int = 5000) -> bool:
    """True when some line has SGLang's ``[YYYY-mm-dd HH:MM:SS`` prefix and an SGLang startup/run marker."""
    for number, line in enumerate(text.splitlines()):
        if number >= scan_lines:
            break
        if _LOG_PREFIX_RE.match(line) and any(marker in line for marker in LOG_MARKERS):
            return True
    return False


def _unknown(file: InputFile) -> InvalidInput:
    return InvalidInput(f"{file.label}: not a known format ({EXPECTED})")
