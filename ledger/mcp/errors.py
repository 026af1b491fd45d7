"""Refusals as MCP tool errors: the CLI's exit code, its meaning and the one-line message.

A tool that refuses (a ``LedgerError``: invalid input, a version conflict, a missing event...)
answers with an MCP tool error (``isError``) whose text is one line, ``exit N (meaning):
message``, and whose structured content is ``{"error": {"exit_code", "meaning", "message"}}``
plus what the refusal carries for the agent to act on (``Refusal.details``: the candidate's
new state after a conflict). An agent branches on ``exit_code`` exactly as on the CLI's.
"""

from __future__ import annotations

from typing import Any

from ledger.errors import EXIT_MEANINGS, InvalidInput, LedgerError


class Refusal(Exception):
    """A ``LedgerError`` with details for the agent (e.g. ``{"candidate": <board row>}``)."""

    def __init__(self, error: LedgerError, **details: Any) -> None:
        super().__init__(str(error))
        self.error = error
        self.details = details


def one_line(text: str) -> str:
    """``text`` with line breaks and other control characters escaped, and secrets masked, as
    the CLI prints its errors (an error quoting input stays one line and leaks no token)."""
    from schemas.secrets import mask_text

    return "".join(
        ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii")
        for ch in mask_text(text)
    )


def error_payload(exc: BaseException) -> tuple[str, dict[str, Any]]:
    """The text and structured content of the tool error for ``exc``.

    ``Refusal`` and ``LedgerError`` keep their exit code; a ``KeyboardInterrupt`` (the call was
    cancelled) is 130; anything else is an internal error (1) named by its type, its
    traceback left to the server's standard error.
    """
    details: dict[str, Any] = {}
    if isinstance(exc, Refusal):
        details = exc.details
        exc = exc.error
    if isinstance(exc, LedgerError):
        code, message = exc.exit_code, str(exc)
    elif isinstance(exc, KeyboardInterrupt):
        code, message = 130, "interrupted: the call was cancelled; what completed is recorded"
    else:
        code, message = 1, f"internal error: {type(exc).__name__}: {exc}"
    if code == 7 and "retry" not in message:  # busy: the agent's next move is to call again
        message += " (retry the call)"
    message = one_line(message)
    meaning = EXIT_MEANINGS.get(code, "error")
    error = {"exit_code": code, "meaning": meaning, "message": message}
    return f"exit {code} ({meaning}): {message}", {"error": error, **details}


def unknown_tool(name: str) -> InvalidInput:
    """The refusal of a call to a tool this server does not have (exit 3)."""
    return InvalidInput(f"no tool {name!r} (tools/list lists them)")
