"""Read an input file and tell which importer reads it, by its content (and, for MoE configs, its name).

Every importer is one module with an ``IMPORTER`` (an ``Importer``: its ``kind``, a
description, a ``sniff`` that scores the file's content and a ``read`` that turns it
into events), listed in ``IMPORTERS`` below: adding a format is one module plus one
line there. ``detect_format`` asks each importer's ``sniff`` and takes the most
confident; a file no importer claims is ``InvalidInput`` naming the file and every
kind that was tried. The modules are loaded on first use, so the CLI's start-up
does not pay for importers it does not run.
"""

from __future__ import annotations

import csv
import hashlib
import importlib
import io
import json
import re
import stat
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from json import JSONDecodeError  # the class's ``json`` property shadows the module there
from pathlib import Path
from typing import Any
from uuid import UUID, uuid5

from ledger.engines.identify import LOOKED_FOR, identify
from ledger.engines.sglang_log import looks_like_server_log
from ledger.engines.vllm_log import is_vllm_log
from ledger.errors import InvalidInput, LedgerError
from ledger.input_files import (
    STREAM_FROM,
    digest_text,
    iter_lines,
    read_head,
    read_regular,
    read_stream,
)
from ledger.write.input_checks import loads
from schemas import Actor, FindingRecorded, Host, ServerStarted, StartupFacts

#: Where each importer lives (``module:attribute``); on equal confidence the first wins.
IMPORTERS: tuple[str, ...] = (
    "ledger.importers.bench_serving:IMPORTER",
    "ledger.importers.moe_config:IMPORTER",
    "ledger.importers.moe_config:VLLM_IMPORTER",
    "ledger.importers.server_log:IMPORTER",
    "ledger.importers.vllm_bench:IMPORTER",
    "ledger.importers.vllm_bench:NIGHTLY_IMPORTER",
    "ledger.importers.guidellm:IMPORTER",
    "ledger.importers.guidellm_console:IMPORTER",
    "ledger.importers.llmperf:SUMMARY_IMPORTER",
    "ledger.importers.llmperf:RESPONSES_IMPORTER",
    "ledger.importers.llmperf:AGGREGATE_IMPORTER",
    "ledger.importers.llmperf:CSV_IMPORTER",
    "ledger.importers.vllm_server_log:IMPORTER",
    "ledger.importers.aiperf:JSON_IMPORTER",
    "ledger.importers.aiperf:CSV_IMPORTER",
    "ledger.importers.aiperf:RECORDS_IMPORTER",
    "ledger.importers.script_results:AB_IMPORTER",
    "ledger.importers.script_results:RUN_IMPORTER",
    "ledger.importers.script_results:SUMMARY_IMPORTER",
)

#: Fixed namespace of imported event ids: uuid5(this, sha256(file) + ":" + label).
IMPORT_NAMESPACE = UUID("5b0c1e7a-8f1d-4c2e-9a57-3d6f0b2a9e41")

#: Keys of every sglang bench_serving result line (0.5.x); three of them make a line one.
BENCH_KEYS = frozenset(
    {
        "completed",
        "duration",
        "request_throughput",
        "output_throughput",
        "mean_ttft_ms",
        "mean_e2e_latency_ms",
        "total_output_tokens",
        "total_output",
        "max_concurrency",
    }
)

MOE_NAME_RE = re.compile(r"^E=\d+,N=\d+,device_name=")
_JSON_ARRAY_RE = re.compile(r"^\[\s*(?:[{\"\]]|\[\s*[\[{\"\]]|$)")


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
    #: an SGLang or vLLM server log past ``STREAM_FROM`` bytes, read as a stream: ``text`` is its head
    #: (``HEAD_BYTES``, what the sniffs read), ``iter_lines`` reads it all
    streamed: bool = False
    #: the importer the sniffs chose for the head of a file read as a stream (sniffed once)
    importer: Importer | None = field(default=None, compare=False, repr=False)

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

    @cached_property
    def json(self) -> Any:
        """The whole text as one JSON document, parsed once (by the sniff, then reused by the
        importer) with the hardened ``loads``.

        Raises:
            json.JSONDecodeError: not one JSON document.
            InvalidInput: nested too deeply, an integer too long to convert.
        """
        return loads(self.text, self.label)

    def run_id(self, engine: str) -> str:
        """The id of the server run a log describes: ``<engine>-<12 hex>`` from the file's content
        and, like event ids, the session imported into (one log in two sessions is two runs)."""
        digest = (
            self.sha256
            if not self.scope
            else hashlib.sha256(f"{self.sha256}:{self.scope}".encode()).hexdigest()
        )
        return f"{engine}-{digest[:12]}"

    def lines(self) -> list[str]:
        """The text split into lines at ``\n`` (no line ends, a ``\r`` before it dropped); line
        ``n`` is ``lines()[n - 1]``, as an editor and ``sed -n Np`` number it. A bare ``\r`` (a
        progress bar redrawing itself) stays inside its line: ``str.splitlines`` would split there
        and shift every later line number."""
        lines = self.text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        return [line[:-1] if line.endswith("\r") else line for line in lines]

    def iter_lines(self, runs: re.Pattern[str] | None = None, after: int = 0) -> Iterator[str]:
        """``lines()`` one at a time; of a file read as a stream (``streamed``), every line of
        the file, read in blocks (``lines()`` is then its head's), past its first ``after`` lines
        those of each match of ``runs`` as one ``BulkRun`` (``input_files.iter_lines``)."""
        return iter_lines(self.path, runs, after) if self.streamed else iter(self.lines())


#: The name standard input goes by in ``source`` references and messages.
STDIN_NAME = "stdin"


#: The standard input read so far and its bytes: one import reads its inputs twice (pairing,
#: then importing), and a stream reads once. Keyed by the stream object itself (a test or the
#: resident process gives each call a stream of its own).
_stdin_read: tuple[object, bytes] | None = None


def _read_stdin() -> bytes:
    global _stdin_read
    stream = sys.stdin.buffer
    if _stdin_read is not None and _stdin_read[0] is stream:
        return _stdin_read[1]
    data = read_stream(stream, STDIN_NAME)  # bounded as a result file is
    _stdin_read = (stream, data)
    return data


def read_input(path: str | Path) -> InputFile:
    """Read ``path`` as UTF-8 text; ``-`` reads standard input (a paste: the same text gives the
    same events as the file, named ``stdin``).

    Raises:
        NotFound: no such file.
        InvalidInput: a directory, a FIFO, a device or anything but a regular file, an empty file, or bytes that are not UTF-8 text
            (named with the line of the first bad byte).
    """
    if str(path) == "-":
        path, data = Path(STDIN_NAME), _read_stdin()
    else:
        path = Path(path)
        streamed = _streamed(path)
        if streamed is not None:
            return streamed
        try:
            data = read_regular(
                path, "result"
            )  # a FIFO or /dev/zero is refused at once, never read
        except InvalidInput as exc:
            raise InvalidInput(f"{exc} ({expected()})") from None
    if not data.strip():
        raise InvalidInput(f"{path}: empty file ({expected()})")
    # A UTF-8 byte-order mark (Windows editors, PowerShell's Tee-Object) is not content: drop it
    # before the bytes name the events, so the file with and without it is the same file.
    data = data.removeprefix(b"\xef\xbb\xbf")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InvalidInput(
            f"{path}:{line}: not UTF-8 text (byte {exc.start}); {expected()}"
        ) from None
    if "\x00" in text:
        line = text[: text.index("\x00")].count("\n") + 1
        raise InvalidInput(f"{path}:{line}: binary data (NUL byte); {expected()}")
    return InputFile(path=path, text=text, sha256=hashlib.sha256(data).hexdigest())


def _streamed(path: Path) -> InputFile | None:
    """A regular file past ``STREAM_FROM`` bytes that is an SGLang or vLLM server log by its head
    (the sniffs on its first ``HEAD_BYTES``), read as a stream (docs/reliability.md, "Server log
    import speed and memory"): its head as ``text``, its hash read through; ``None`` for any
    other file (read whole, refused past its bound)."""
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode) or info.st_size <= STREAM_FROM:
            return None
        head = read_head(path)
    except (OSError, LedgerError):
        return None  # read_regular names what is wrong
    if head is None or not head.strip():
        return None
    sniffed = Sniffed(InputFile(path=path, text=head, sha256=""))
    if not (sniffed.sglang_server_log or sniffed.vllm_server_log):
        return None
    importer = detect_format(sniffed.file, sniffed)  # the head's line scans above not run again
    if importer.kind not in STREAMED_KINDS:
        return None
    try:
        digest = digest_text(path)
    except InvalidInput as exc:
        raise InvalidInput(f"{exc}; {expected()}") from None
    return InputFile(path=path, text=head, sha256=digest, streamed=True, importer=importer)


#: The importers that read a file as a stream (``InputFile.streamed``).
STREAMED_KINDS = frozenset({"sglang-server-log", "vllm-server-log"})


def looks_like_bench(obj: Any) -> bool:
    """True for a JSON object with at least three sglang bench_serving result keys."""
    return isinstance(obj, dict) and len(BENCH_KEYS & obj.keys()) >= 3


def looks_like_moe(obj: Any) -> bool:
    """True for a JSON object whose values are objects with ``BLOCK_SIZE_M`` (a top-level
    string such as vLLM's ``"triton_version"`` aside)."""
    if not isinstance(obj, dict):
        return False
    entries = [v for v in obj.values() if not isinstance(v, str)]
    return (
        bool(entries)
        and all(isinstance(v, dict) for v in entries)
        and any("BLOCK_SIZE_M" in v for v in entries)
    )


@dataclass(frozen=True)
class ImportContext:
    """What the caller of ``import_file`` gives every importer: the session, the host to
    merge into each event's, the actor, the configuration name of bench runs and the
    startup facts of the previous server run (for capacity findings of server logs)."""

    session_id: str | None = None
    host: Host | None = None
    actor: Actor = field(default_factory=Actor)
    config_name: str | None = None
    previous_startup: StartupFacts | None = None
    #: the ``known-no-effect`` findings of a server run's flags (``ledger.read.flag_memory``), if given
    remember: Callable[[ServerStarted], list[FindingRecorded]] | None = None


#: What ``Importer.read`` returns: events in append order, and per-request samples
#: tables (``bench_samples`` columns but the event id) keyed by benchmark event id.
ReadResult = tuple[list[Any], dict[UUID, Any]]


@dataclass(frozen=True)
class Later:
    """A sniff's score that costs a scan of the text (``Sniffed.engine``: ``identify`` over up to
    20,000 lines of a log's head): ``detect_format`` asks ``score()`` only where a score of
    ``at_most`` could still win, so the answer is the one asking it always gives."""

    at_most: float
    score: Callable[[], float]


@dataclass(frozen=True)
class Importer:
    """One file format: ``kind`` (``vllm-bench-serve``), ``description`` (for the
    "kinds tried" of an unknown file), ``sniff(Sniffed) -> float`` (0: not this format;
    up to 1: certain; the highest wins, the first registered on a tie; a ``Later`` for a score
    that needs a scan) and ``read(InputFile, ImportContext) -> (events, samples)``, which raises
    ``InvalidInput`` naming the line and field that break the format's rules."""

    kind: str
    description: str
    sniff: Callable[[Sniffed], float | Later]
    read: Callable[[InputFile, ImportContext], ReadResult]
    #: the other files of one run this format's file takes in when they are imported with it
    pairings: tuple[Pairing, ...] = ()
    #: the most ``sniff`` returns: where another importer's sniff already reached it, this one's
    #: is not run (it could not win: the first registered wins a tie)
    max_score: float = 1.0


@dataclass(frozen=True)
class Pairing:
    """Another file of the same run, imported with a file of this format: one benchmark, not two.

    ``kind``: the other file's importer kind; ``same_run(this, other)``: whether the two
    files are of one run (by its id, its request count and timings: never by name alone);
    ``read(this, other, ctx)``: the run's events from both (the other file's requests as the
    samples); ``None`` when the other file is the same report in another format and adds
    nothing (GuideLLM's YAML beside its JSON)."""

    kind: str
    same_run: Callable[[InputFile, InputFile], bool]
    read: Callable[[InputFile, InputFile, ImportContext], ReadResult] | None = None


class Sniffed:
    """A file's content parsed once for every ``sniff``: ``json`` (the whole document,
    or ``None``), ``json_error``, ``first_json_line`` (the first non-blank line of a
    JSON Lines file), ``yaml`` (for a ``.yaml``/``.yml`` name or a ``---`` start) and
    ``csv_rows`` (the rows of a ``.csv`` file); each is computed on first use."""

    def __init__(self, file: InputFile) -> None:
        self.file = file
        self.text = file.text
        self.stripped = file.text.lstrip()

    @property
    def claims_json(self) -> bool:
        """The text starts like JSON: ``{``, or a ``[`` that opens an array of objects, arrays or
        strings (a log line's ``[2025-...``, ``[rank0]:`` or ``[23:17:01 TP7]`` does not)."""
        return self.stripped.startswith("{") or bool(_JSON_ARRAY_RE.match(self.stripped))

    @cached_property
    def sglang_server_log(self) -> bool:
        """The text has SGLang's line prefix and a startup or run marker (``is_server_log``)."""
        return is_server_log(self.text)

    @cached_property
    def vllm_server_log(self) -> bool:
        """The text is a vLLM server's log by its lines (``ledger.engines.vllm_log.is_vllm_log``)."""
        return is_vllm_log(self.text)

    @cached_property
    def engine(self) -> str | None:
        """The engine whose lines the text shows, for a log excerpt (``ledger.engines.identify``)."""
        return identify(self.file.lines()).engine

    @cached_property
    def _whole(self) -> tuple[Any, json.JSONDecodeError | None]:
        if not self.claims_json:
            return None, None
        try:
            return self.file.json, None  # too deep, too long an integer: InvalidInput
        except json.JSONDecodeError as exc:
            return None, exc

    @property
    def json(self) -> Any:
        """The whole text as one JSON document, or ``None``."""
        return self._whole[0]

    @property
    def json_error(self) -> JSONDecodeError | None:
        """Why the text is not one JSON document (``None`` when it is, or does not claim JSON)."""
        return self._whole[1]

    @cached_property
    def first_json_line(self) -> Any:
        """The first non-blank line parsed as JSON, for a text that is not one JSON document."""
        if not self.claims_json or self.json_error is None:
            return None
        for line in self.file.lines():
            if line.strip():
                try:
                    return loads(line, self.file.label)
                except json.JSONDecodeError:
                    return None
        return None

    @cached_property
    def yaml(self) -> Any:
        """The YAML document of a ``.yaml``/``.yml`` file or a text starting ``---``, else ``None``."""
        suffix = self.file.path.suffix.lower()
        if self.claims_json or not (suffix in (".yaml", ".yml") or self.stripped.startswith("---")):
            return None
        return load_yaml(self.file, strict=False)

    @cached_property
    def csv_rows(self) -> list[list[str]]:
        """The rows of a ``.csv`` file (empty for other names)."""
        if self.file.path.suffix.lower() != ".csv":
            return []
        try:
            return list(csv.reader(io.StringIO(self.text)))
        except csv.Error:
            return []


def load_yaml(file: InputFile, *, strict: bool = True) -> Any:
    """The YAML document of ``file`` (PyYAML's safe loader).

    Raises:
        InvalidInput: ``FILE:LINE: not valid YAML (...)`` (or nested too deeply for the parser)
            when ``strict``; otherwise ``None`` is returned.
    """
    import yaml

    try:
        return yaml.safe_load(file.text)
    except RecursionError:  # PyYAML composes nested collections recursively
        if not strict:
            return None
        raise InvalidInput(f"{file.label}: not valid YAML (nested too deeply)") from None
    except yaml.YAMLError as exc:
        if not strict:
            return None
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise InvalidInput(
            f"{file.label}{line}: not valid YAML ({getattr(exc, 'problem', None) or exc})"
        ) from None


_LOADED: list[Importer] = []


def registered_importers() -> list[Importer]:
    """Every importer of ``IMPORTERS``, loaded once, in registration order."""
    if not _LOADED:
        loaded = []
        for entry in IMPORTERS:
            module, _, attribute = entry.partition(":")
            loaded.append(getattr(importlib.import_module(module), attribute))
        _LOADED.extend(loaded)
    return _LOADED


def expected() -> str:
    """``expected one of: KIND, ...`` for error messages."""
    return f"expected one of: {kinds_tried()}"


def detect_format(file: InputFile, sniffed: Sniffed | None = None) -> Importer:
    """The importer that reads ``file``: the one whose ``sniff`` is most confident (``sniffed``:
    the file's ``Sniffed`` where the caller made one, its scans already done).

    Raises:
        InvalidInput: ``FILE: not a known format (tried: KIND, ...)``;
            a file that claims JSON (``.json``/``.jsonl``/``.ndjson``, or a MoE config
            name) but does not parse is named with the line that breaks.
    """
    if file.importer is not None:
        return file.importer  # a file read as a stream: its head was sniffed
    if sniffed is None or sniffed.file is not file:
        sniffed = Sniffed(file)
    best: Importer | None = None
    best_score, best_at = 0.0, -1
    later: list[tuple[int, Importer, Later]] = []
    for index, importer in enumerate(registered_importers()):
        if importer.max_score <= best_score:
            continue  # it cannot win (an 8 MiB log head's sniff by each importer costed 0.1 s)
        score = importer.sniff(sniffed)
        if isinstance(score, Later):
            later.append((index, importer, score))
        elif score > best_score:
            best, best_score, best_at = importer, score, index
    # The scores that need a scan, where they could win: above the best, or equal to it and
    # registered before it (a vLLM log's head is not scanned for SGLang's excerpt score)
    for index, importer, pending in later:
        if pending.at_most > best_score or (pending.at_most == best_score and index < best_at):
            score = pending.score()
            if score > best_score or (score == best_score and score > 0 and index < best_at):
                best, best_score, best_at = importer, score, index
    if best is not None:
        return best
    error = sniffed.json_error
    moe_name = bool(MOE_NAME_RE.match(file.name))
    if error is not None and (
        moe_name or file.path.suffix.lower() in (".json", ".jsonl", ".ndjson")
    ):
        if moe_name:
            raise json_line_error(file, error)
        # Not one JSON document: as JSON Lines, the first line that does not parse is named
        # (every line parsing means JSON Lines of objects no importer knows).
        json_lines(file)
    raise unknown_format(file)


def is_server_log(text: str, scan_lines: int = 5000) -> bool:
    """True when some line has SGLang's ``[YYYY-mm-dd HH:MM:SS`` prefix (bare or inside a host
    program's own log line) and an SGLang startup/run marker (``ledger.engines.sglang_log``)."""
    return looks_like_server_log(text, scan_lines)


def unknown_format(file: InputFile) -> InvalidInput:
    """The error of a file no importer claims: it names the file and the kinds tried, and for
    text that is not JSON what a log excerpt was searched for."""
    looked = (
        "" if Sniffed(file).claims_json else f"; no engine log line in it (looked for {LOOKED_FOR})"
    )
    return InvalidInput(f"{file.label}: not a known format (tried: {kinds_tried()}){looked}")


def kinds_tried() -> str:
    """The kinds of every registered importer, comma-separated."""
    return ", ".join(i.kind for i in registered_importers())


def json_lines(file: InputFile) -> list[tuple[int, Any]]:
    """(line number, value) of each non-blank line of a JSON Lines file, read with the
    hardened ``loads`` (depth and integer-length limits, as every user input).

    Raises:
        InvalidInput: the first line that is not JSON (``FILE:LINE: not valid JSON …``), or too
            deep / too long an integer.
    """
    out = []
    for number, line in enumerate(file.lines(), start=1):
        if not line.strip():
            continue
        try:
            out.append((number, loads(line, f"{file.label}:{number}")))
        except json.JSONDecodeError as exc:
            raise json_line_error(file, exc, number) from None
    return out


def json_line_error(
    file: InputFile, exc: json.JSONDecodeError, line: int | None = None
) -> InvalidInput:
    """``FILE:LINE: not valid JSON (MSG at column C)``."""
    return InvalidInput(
        f"{file.label}:{line or exc.lineno}: not valid JSON ({exc.msg} at column {exc.colno})"
    )
