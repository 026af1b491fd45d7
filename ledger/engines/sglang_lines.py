"""SGLang's own line grammar: its prefix, its server args, its batch lines.

Formats (SGLang's ``logger`` setup, ``configure_logger``, read in its source and in public logs of
0.4.x to 0.5.23):

- line prefix ``[YYYY-mm-dd HH:MM:SS{.mmm}{ TPn}{ DPn}{ EPn}{ PPn}] message`` (``.mmm`` when
  ``SGLANG_LOG_MS`` is set); some builds put ``LEVEL file.py:NNN: `` before the message. SGLang's
  default format prints no level. Lines without the prefix (tracebacks, tqdm bars,
  ``warnings.warn`` output) belong to the log record before them.
- whatever launchers put around a line (docker compose, the journal, a host program's logger)
  is taken off first (``ledger.engines.lines``).
- ``server_args=ServerArgs(k=v, ...)`` (dataclass repr, up to 0.5.14) or
  ``server_args={'k': v, ...}`` (dict repr, 0.5.23), both Python literal syntax.
"""

from __future__ import annotations

import ast
import math
import re
import sys
from datetime import datetime
from typing import Any

from .lines import LogLine, Unwrapper, has_layer_mark, head_lines, inner_level, parse_stamp

_TS = r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}"
_RANKS = r"(?: [A-Z][A-Z_]*\d+)*"
# Old SGLang (0.3 and before) printed the time of day only, always with a rank: "[23:17:01 TP7] ".
PREFIX_RE = re.compile(
    rf"^\[(?:(?P<ts>{_TS})(?:[.,](?P<frac>\d{{1,6}}))?(?P<ranks>{_RANKS})"
    rf"|(?P<time>\d{{2}}:\d{{2}}:\d{{2}})(?P<tranks>(?: [A-Z][A-Z_]*\d+)+))\] ?(?P<msg>.*)$"
)
#: The date a time-only prefix is read on (its day is unknown): importers give such lines no time.
UNDATED = datetime(1900, 1, 1)
#: SGLang's prefix anywhere in a line (a line glued after a progress bar's last frame).
INNER_RE = re.compile(rf"\[{_TS}(?:[.,]\d{{1,6}})?{_RANKS}\] ")
_RANK_RE = re.compile(r"([A-Z][A-Z_]*?)(\d+)")

#: SGLang's ready line.
READY = "The server is fired up and ready to roll"
#: What a message must hold for a rule of ``sglang_facts._RULES`` before its batch rules to
#: match it when it starts as a batch line does (the rules that read a start need another).
_BEFORE_BATCH_CUES = re.compile(
    "|".join(
        re.escape(cue)
        for cue in (
            "Attention backend not ",  # _ATTN_DEFAULT_RE
            "MLA optimization is turned on",  # _MLA_ATTN_RE
            "Load weight end",  # _LOAD_WEIGHT_RE
            "Capture ",  # _CG_BS_RE, _CG_TOKENS_RE, _CG_PHASE_RE
            "Disable ",  # _PIECEWISE_DISABLE_RE, _PREFILL_GRAPH_DISABLE_RES[0]
            "Breakable CUDA graph is incompatible",  # _PREFILL_GRAPH_DISABLE_RES[1]
            "MoE kernel config",  # the MoE lookups
            "Config file not found at",
            "Down MoE config file not found",
            READY,
        )
    )
)
_BATCH_STARTS = {"Decode batch.": "decode", "Decode batch,": "decode"}
_BATCH_STARTS.update({"Prefill batch.": "prefill", "Prefill batch,": "prefill"})


def batch_kind(msg: str) -> str | None:
    """``"decode"`` / ``"prefill"`` for a batch line that no rule of ``sglang_facts._RULES``
    before its batch rules can match, known without trying them (~4 us a line, and a served log
    is mostly batch lines): it holds none of what they need (``_BEFORE_BATCH_CUES``); ``None``
    for any other message, which ``_RULES`` reads in order (``tests/engines/test_plain_line.py``
    compares both on every fixture message and on messages built from each rule's pattern)."""
    kind = _BATCH_STARTS.get(msg[:13]) or _BATCH_STARTS.get(msg[:14])
    if kind is None or _BEFORE_BATCH_CUES.search(msg) is not None:
        return None
    return kind


#: Markers that make a text file an SGLang server log (used by format detection).
LOG_MARKERS: tuple[str, ...] = (
    "server_args=",
    "Load weight end",
    "KV Cache is allocated",
    "Capture cuda graph",
    "CUDA graph begin",
    "The server is fired up and ready to roll",
    "Decode batch",
    "Prefill batch",
    "Attention backend not specified",
    "Attention backend not set",
    "Scheduler hit an exception",
    "max_total_num_tokens=",
)


class LogFormatError(ValueError):
    """A line that has SGLang's shape but a value that cannot be (``Feb 30``, hour 24, year 0, a
    ``pp_size`` given as a string, ``max_running_requests=0``).

    ``line`` is the 1-based line number, ``field`` the name of the value; ``str()`` is
    ``line N: field F: problem``. Raised only by ``parse_server_log(..., strict=True)``.
    """

    def __init__(self, line: int, field: str, problem: str) -> None:
        super().__init__(f"line {line}: field {field}: {problem}")
        self.line, self.field, self.problem = line, field, problem


def split_line(
    number: int, raw: str, *, strict: bool = False, unwrapper: Unwrapper | None = None
) -> LogLine:
    """Split one raw line into prefix parts and message (see the module doc).

    Launchers' prefixes are taken off by ``unwrapper`` (one learned from this line when none is
    given); ``wrapped`` is then True. A prefix whose date or time cannot be (Feb 30, hour 24,
    year 0) makes the line an unprefixed one, or with ``strict`` raises ``LogFormatError``.
    """
    if unwrapper is None:
        unwrapper = Unwrapper()
        unwrapper.learn([raw])
    elif unwrapper.host is None and (line := _plain_line(number, raw)) is not None:
        return line
    return split_in_full(number, raw, strict=strict, unwrapper=unwrapper)


def split_in_full(number: int, raw: str, *, strict: bool, unwrapper: Unwrapper) -> LogLine:
    """``split_line`` the full way: every launcher layer looked for (``_plain_line`` is its
    shortcut for the lines that have none)."""
    outer = unwrapper.unwrap(raw)
    text = outer.text
    match = PREFIX_RE.match(text)
    if (
        not match
        and (inner := INNER_RE.search(text))
        and text[: inner.start()].rstrip().endswith("]")
    ):
        # a progress bar's last frame glued to the next log line ("... 5.58it/s][2026-...] ...")
        match = PREFIX_RE.match(text[inner.start() :])
    ranks = {"rank": outer.rank} if outer.rank is not None else {}
    if not match:
        return LogLine(
            number,
            raw.rstrip("\r\n"),
            text.rstrip(),  # indentation kept: a traceback is read by it
            ranks=ranks,
            level=outer.level,
            wrapped=outer.wrapped,
        )
    stamp_text = match.group("ts") or f"{UNDATED:%Y-%m-%d} {match.group('time')}"
    try:
        stamp = parse_stamp(stamp_text)
    except ValueError as exc:
        if strict:
            raise LogFormatError(
                number, "timestamp", f"{stamp_text!r} is not a date and time ({exc})"
            ) from None
        return LogLine(number, raw.rstrip("\r\n"), text.rstrip(), wrapped=outer.wrapped)
    if match.group("frac"):
        stamp = stamp.replace(microsecond=int(match.group("frac").ljust(6, "0")))
    rank_text = match.group("ranks") or match.group("tranks") or ""
    ranks.update({kind: int(n) for kind, n in _RANK_RE.findall(rank_text)})
    level, message = inner_level(match.group("msg"))
    return LogLine(
        number,
        raw.rstrip("\r\n"),
        message,
        timestamp=stamp,
        ranks=ranks,
        level=level or outer.level,
        wrapped=outer.wrapped,
    )


#: The bulk of a served log: SGLang's own prefix with a date and ranks, a message with no
#: level of its own, no launcher layer (``_plain_line``).
_PLAIN_RE = re.compile(rf"\[({_TS})({_RANKS})\] ")
_LEVEL_STARTS = ("DEBUG", "INFO", "WARN", "ERROR", "CRITICAL")
#: One read-only ``ranks`` dict per rank text: a served log's lines repeat a few (``TP0`` ..
#: ``TP7``), and a dict each was a quarter of a ``LogLine``'s memory. Never mutated.
_RANK_DICTS: dict[str, dict[str, int]] = {}


def _plain_line(number: int, raw: str) -> LogLine | None:
    """``split_line`` of a line that starts with SGLang's dated prefix and holds nothing a
    launcher layer, a bracketed level or a progress bar's frame starts with (one ``[``, no ESC,
    ``\r``, backtick, fence or autolink); ``None`` for any other line, which goes the full way. For such a line every launcher rule of
    ``lines.strip_layers`` and ``inner_level`` needs a character or a start it does not have, so
    the answer is the full way's (``tests/engines/test_plain_line.py`` checks both on every
    fixture line and on generated ones). Most of a served log's lines (``Decode batch``,
    ``Prefill batch``, access lines) are such lines; the full way costed ~6 us each."""
    raw = raw.rstrip("\r\n")
    if raw[:1] != "[" or raw.count("[") != 1 or has_layer_mark(raw):
        return None
    match = _PLAIN_RE.match(raw)
    if match is None:
        return None
    level, message = None, raw[match.end() :]
    if message.startswith(_LEVEL_STARTS):
        level, message = inner_level(message)  # "INFO:     ...", "LEVEL file.py:N: "
    try:
        stamp = parse_stamp(match.group(1))
    except ValueError:
        return None  # the full way says what is wrong with it
    rank_text = match.group(2)
    ranks = _RANK_DICTS.get(rank_text)
    if ranks is None:
        ranks = {kind: int(n) for kind, n in _RANK_RE.findall(rank_text)}
        if len(_RANK_DICTS) < 1024:
            _RANK_DICTS[rank_text] = ranks
    return LogLine(number, raw, message, timestamp=stamp, ranks=ranks, level=level)


def looks_like_server_log(text: str, scan_lines: int = 5000) -> bool:
    """True when some line (of the first ``scan_lines``) is an SGLang line, bare or inside a
    launcher's prefix, carrying an SGLang startup/run marker (``LOG_MARKERS``)."""
    lines = head_lines(text, scan_lines)
    unwrapper = Unwrapper()
    unwrapper.learn(lines)
    for raw in lines:
        # the prefix's shape only: a line with an impossible date is still SGLang's, refused later
        if "[" in raw and any(marker in raw for marker in LOG_MARKERS):
            if PREFIX_RE.match(unwrapper.unwrap(raw).text):
                return True
    return False


def _scalar(text: str) -> Any:
    text = text.strip()
    if text in ("True", "False"):
        return text == "True"
    # the shapes of a batch line's values first, each what the loop below gives it (a raised
    # ValueError costs more than the rest of the line's parse): plain digits are an int, and
    # ``int`` refuses any text with a dot, so such a text goes to ``float`` at once
    if text.isascii() and text.isdigit():
        return int(text)
    if "." in text:
        try:
            return float(text)
        except ValueError:
            return text
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    return text


def scalar(text: str) -> Any:
    """``"3"`` -> 3, ``"0.5"`` -> 0.5, ``"True"`` -> True, anything else as the text."""
    return _scalar(text)


def parse_batch_fields(text: str) -> dict[str, Any]:
    """``"#running-req: 1, #token: 20, cuda graph: True, "`` -> ``{"#running-req": 1, ...}``.

    Values become int, float or bool where they parse so. A trailing comma
    (older ``Decode batch.`` lines) is fine.
    """
    fields: dict[str, Any] = {}
    for part in text.split(", "):
        pair = _PARTS.get(part)
        if pair is None:
            pair = _part(part)
            if len(_PARTS) >= _PARTS_MAX:
                _PARTS.clear()
            _PARTS[part] = pair
        if pair is not _NO_PAIR:
            fields[pair[0]] = pair[1]
    return fields


_NO_PAIR: tuple[str, Any] = ("", None)
#: ``_part`` of the parts seen last: a served log's batch lines repeat most of theirs
#: (``#queue-req: 0``, ``cuda graph: True``) on every rank and step, and the parse of one
#: (strips, a partition, a number's parse) costed most of ``parse_batch_fields``. Cleared when
#: full, so it stays small; a part's pair is the same whenever it is computed.
_PARTS: dict[str, tuple[str, Any]] = {}
_PARTS_MAX = 8192


def _part(part: str) -> tuple[str, Any]:
    """One ``key: value`` part of a batch line as (key, value); ``_NO_PAIR`` for none."""
    key, sep, value = part.strip().strip(",").partition(": ")
    if not (sep and key):
        return _NO_PAIR
    # interned: a served log has a batch line per rank per step, all with the same few keys
    # (one copy each instead of one per line: a fifth of the reader's memory)
    return sys.intern(key.strip()), _scalar(value.strip().rstrip(","))


def _literal(node: ast.AST) -> Any:
    """A literal value, or the source text when it is not a literal (``device(type='cuda')``)."""
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return ast.unparse(node)


def parse_server_args(text: str) -> dict[str, Any]:
    """Parse the text after ``server_args=``: ``ServerArgs(a=1, b='x')`` or ``{'a': 1, 'b': 'x'}``.

    Values are Python literals (``ast.literal_eval``); a value that is not a
    literal (an enum or object repr) is kept as its source text. A repr that is
    not valid Python at all (an ``<Enum.X: 1>`` repr) is split on top-level
    commas and parsed key by key.

    Raises:
        ValueError: the text is neither form.
    """
    text = text.strip()
    try:
        tree = ast.parse(text, mode="eval").body
    except SyntaxError:
        return _parse_args_tolerant(text)
    if isinstance(tree, ast.Call):
        return {kw.arg: _literal(kw.value) for kw in tree.keywords if kw.arg}
    if isinstance(tree, ast.Dict):
        result: dict[str, Any] = {}
        for key, value in zip(tree.keys, tree.values, strict=True):
            if key is not None:
                result[str(_literal(key))] = _literal(value)
        return result
    raise ValueError(f"server_args is neither ServerArgs(...) nor a dict: {text[:60]!r}")


def _split_top_level(body: str) -> list[str]:
    """Split on commas outside quotes and brackets."""
    parts, depth, quote, start, i = [], 0, "", 0, 0
    while i < len(body):
        ch = body[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(body[start:i])
            start = i + 1
        i += 1
    parts.append(body[start:])
    return [p.strip() for p in parts if p.strip()]


def _parse_args_tolerant(text: str) -> dict[str, Any]:
    if text.startswith("ServerArgs(") and text.endswith(")"):
        body, sep = text[len("ServerArgs(") : -1], "="
    elif text.startswith("{") and text.endswith("}"):
        body, sep = text[1:-1], ":"
    else:
        raise ValueError(f"server_args is neither ServerArgs(...) nor a dict: {text[:60]!r}")
    result: dict[str, Any] = {}
    for part in _split_top_level(body):
        key, found, value = part.partition(sep)
        if not found:
            continue
        key = key.strip().strip("'\"")
        try:
            result[key] = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            result[key] = value.strip()
    return result


def jsonable_args(args: dict[str, Any]) -> dict[str, Any]:
    """Server args with JSON-safe values: tuples and sets as lists, non-finite floats as strings."""
    return {key: jsonable(value) for key, value in args.items()}


def jsonable(value: Any) -> Any:
    """One value made JSON-safe (see ``jsonable_args``)."""
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((jsonable(v) for v in value), key=repr)
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def version_tuple(version: str | None) -> tuple[int, ...] | None:
    """``"0.5.23+cu128"`` -> ``(0, 5, 23)``: its first three numbers; ``None`` for none."""
    if not version:
        return None
    parts = re.findall(r"\d+", version.split("+")[0])[:3]
    return tuple(int(p) for p in parts) if parts else None
