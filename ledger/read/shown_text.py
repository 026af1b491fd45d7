"""Text as a person's terminal shows it: control characters escaped (docs/reliability.md).

Stored text is whatever an event carried: a note, a log line, a file name, a flag value. A
terminal acts on some of it: ``ESC ] 0 ; … BEL`` sets the window title, ``ESC [ 2 J`` clears
the screen, ``CR`` writes over what was shown, a bidirectional override (U+202E) shows text
in another order than it is stored. Every human-readable output (the ``events`` and ``sql``
tables and CSV, ``show``, the Markdown export) passes its text through ``escape_controls``,
so such characters are shown as escapes (``\\x1b``, ``\\u202e``), never acted on. JSON output
needs nothing more: JSON escapes C0 controls and, as written here (``ensure_ascii``),
every character beyond ASCII.

A backslash escape in the output is therefore either an escaped control character or text
that held a backslash: the stored text is the truth (``--format json`` shows it exactly).
"""

from __future__ import annotations

import re

#: C0 controls but tab and newline, DEL, C1 controls (0x9B is CSI on 8-bit terminals), and the
#: bidirectional formatting characters (marks, embeddings, overrides, isolates).
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
#: As ``_CONTROLS``, newline and tab too: for one-line places (a table cell's summary, a header).
_CONTROLS_ONE_LINE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_controls(text: str, *, one_line: bool = False) -> str:
    """``text`` with terminal control characters shown as escapes; newlines and tabs kept
    unless ``one_line``. Text without any comes back as it is (one C-speed search)."""
    pattern = _CONTROLS_ONE_LINE if one_line else _CONTROLS
    if pattern.search(text) is None:
        return text
    return pattern.sub(_escape, text)
