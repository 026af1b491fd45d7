"""Triton compile failures of a tuning config, in one line instead of a terminal flood.

When a pass of Triton's MLIR pipeline fails, Triton (3.3 to 3.6, since it dumps reproducers to
``std::errs`` by default: triton-lang/triton#5923) writes the whole module, hundreds of lines,
to file descriptor 2 from C++, and Python only sees ``RuntimeError: PassManager::run failed``.
SGLang's fused-MoE tuning space holds configs that hit such bugs on Hopper (BLOCK_SIZE_M 256
with 4 warps: the ``TritonGPURemoveLayoutConversions`` dominance failure of
triton-lang/triton#9809 and #9928, which vLLM's tuner also meets, vllm-project/vllm#39260), so a
tune printed that flood for each of them at every batch size.

``captured_stderr`` redirects descriptor 2 itself (a ``sys.stderr`` swap would not see C++
writes) into a temporary file around the compile; ``compile_failure`` keeps what a person needs
from it: the first diagnostic line and the pass that failed. The layout of that output, as
Triton 3.6 prints it::

    FILE:LINE:COL: error: operand #0 does not dominate this use     <- the first diagnostic
        source line / caret / notes
    module { ... }                                                    <- the reproducer
    {-# external_resources: { mlir_reproducer: { pipeline: "...", ... } } #-}
    FILE:LINE:COL: error: Failures have been detected while processing an MLIR pass pipeline
    FILE:LINE:COL: note: Pipeline failed while executing [`PASS` on 'builtin.module' operation]: ...
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

#: The pass named in MLIR's "Pipeline failed while executing [`PASS` on ...]" note.
_FAILED_PASS = re.compile(r"Pipeline failed while executing \[`([^`]+)`")
#: A diagnostic: ``LOCATION: error: TEXT`` (the location is a file:line:col, or ``loc(...)``).
_DIAGNOSTIC = re.compile(r"^(?P<loc>.*?):\s*error:\s*(?P<text>.+)$")
#: MLIR's summary error, which names no cause (the note after it names the pass).
_SUMMARY = "Failures have been detected while processing an MLIR pass pipeline"
#: What a one-line reason may hold (the rejection event keeps it; a terminal line shows it).
MAX_CHARS = 300


@dataclass
class Captured:
    """What was written to descriptor 2 inside ``captured_stderr`` (filled when the block ends)."""

    text: str = field(default="")


@contextmanager
def captured_stderr() -> Iterator[Captured]:
    """Descriptor 2 into a temporary file for the block, C++ writes included; ``.text`` after.

    Python's own ``sys.stderr`` buffer is flushed on both sides, so nothing written before the
    block lands in it and nothing written in it leaks out after.
    """
    captured = Captured()
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield captured
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            captured.text = sink.read().decode("utf-8", "replace")


@dataclass(frozen=True)
class CompileFailure:
    """The first diagnostic of a failed compile and the pass that failed (None when not named)."""

    first_line: str
    failed_pass: str | None

    def reason(self, exc: BaseException) -> str:
        """One line for the rejection event and the terminal."""
        where = f" in pass {self.failed_pass}" if self.failed_pass else ""
        line = f"Triton compile failed{where}: {self.first_line} ({_exception_line(exc)})"
        return line if len(line) <= MAX_CHARS else line[: MAX_CHARS - 1] + "…"


def _exception_line(exc: BaseException, limit: int = 120) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:limit]}"


def _short_location(loc: str) -> str:
    """``/long/path/fused_moe.py:574:24`` -> ``fused_moe.py:574:24`` (the file's name says enough)."""
    return os.path.basename(loc.strip()) or loc.strip()


def compile_failure(text: str) -> CompileFailure | None:
    """The compile failure ``text`` (what Triton wrote to descriptor 2) shows, or None if none.

    The first line is the first ``error:`` diagnostic other than MLIR's summary (that one
    only when there is no other); the pass is the one MLIR's note names.
    """
    failed = _FAILED_PASS.search(text)
    first = summary = None
    for raw in text.splitlines():
        match = _DIAGNOSTIC.match(raw.strip())
        if match is None:
            continue
        line = f"{_short_location(match['loc'])}: {match['text'].strip()}"
        if _SUMMARY in match["text"]:
            summary = summary or line
        else:
            first = line
            break
    first = first or summary
    if first is None and failed is None:
        return None
    return CompileFailure(first or "no diagnostic line", failed.group(1) if failed else None)


def rejection_reason(exc: BaseException, stderr_text: str) -> str:
    """Why a config was rejected, in one line: the compile failure the captured output shows,
    else the exception's own line."""
    failure = compile_failure(stderr_text)
    return failure.reason(exc) if failure else _exception_line(exc, 240)


def is_compile_failure(reason: str) -> bool:
    """Whether a rejection reason is a Triton compile failure (``rejection_reason``'s wording)."""
    return reason.startswith("Triton compile failed")
