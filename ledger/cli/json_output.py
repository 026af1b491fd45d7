"""Output for programs: one convention for every command's ``--json`` (docs/cli.md, "Output
for programs").

- ``--json`` asks for machine-readable output; on a command that has ``--format``, ``--json``
  is ``--format json`` (``json_format_options``).
- Standard output then holds exactly one JSON document: rows are one array of objects, a
  single result is one object. Progress and other human text go to standard error.
- A refused call prints its error as one JSON object on standard error, the same object the
  MCP server's tool errors carry (``ledger.mcp.errors``): ``{"error": {"exit_code": N,
  "meaning": WORD, "message": TEXT}}``, with the exit code unchanged (``ledger.errors``).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import click

from ledger.errors import EXIT_MEANINGS
from ledger.read.json_values import jsonable

JSON_HELP = "Print one JSON document to standard output (docs/cli.md: Output for programs)."

#: ``--json`` of a command without ``--format``.
json_option = click.option("--json", "as_json", is_flag=True, help=JSON_HELP)


def json_format_options(
    choices: Sequence[str], default: str, help: str | None = None
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``--format CHOICE`` and ``--json`` (the same as ``--format json``); the command gets
    ``fmt``. ``--json`` with another ``--format`` is a usage error (exit 2): they disagree."""

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(command)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            as_json = kwargs.pop("as_json")
            fmt = kwargs.pop("fmt")
            if as_json and fmt not in (None, "json"):
                raise click.UsageError(f"--json and --format {fmt} disagree: give one of them")
            kwargs["fmt"] = "json" if as_json else (fmt or default)
            return command(*args, **kwargs)

        wrapper = click.option(
            "--json", "as_json", is_flag=True, help="The same as --format json."
        )(wrapper)
        text = f"{help + ' ' if help else ''}[default: {default}]"
        return click.option("--format", "fmt", type=click.Choice(list(choices)), help=text)(wrapper)

    return decorate


def print_json(value: Any, *, indent: int | None = 2) -> None:
    """``value`` as the one JSON document of standard output (``indent=None``: on one line)."""
    # ensure_ascii: C1 controls and bidirectional overrides escaped too (docs/reliability.md)
    click.echo(json.dumps(jsonable(value), indent=indent))


def wants_json(argv: Sequence[str]) -> bool:
    """Whether the command line asks for JSON output (``--json``, ``--format json``); what
    follows ``--`` is arguments, not options."""
    args = list(argv)
    if "--" in args:
        args = args[: args.index("--")]
    return (
        "--json" in args
        or "--format=json" in args
        or any(a == "--format" and b == "json" for a, b in zip(args, args[1:], strict=False))
    )


def error_json(message: str, code: int) -> str:
    """The JSON error line of a refused call (the MCP tool error's ``error`` object)."""
    error = {"exit_code": code, "meaning": EXIT_MEANINGS.get(code, "error"), "message": message}
    return json.dumps({"error": error})


def print_json_array(items: Iterable[str]) -> int:
    """Stream ``items`` (each one JSON value's text) as one JSON array on standard output, one
    item per line, while they come (memory stays at one item); returns how many. A call that
    fails midway leaves an unfinished array: its exit code is not 0, and stdout is not read."""
    count = 0
    for text in items:
        click.echo(("[\n" if count == 0 else ",\n") + text, nl=False)
        count += 1
    click.echo("\n]" if count else "[]")
    return count
