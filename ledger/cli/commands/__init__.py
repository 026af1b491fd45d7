"""The core commands of ``tuneledger``, one module each: options, one library call, print.

``COMMANDS`` is what ``ledger.cli.main``'s root group lists: a command's name and where it
lives (``module:attr``), imported only when that command runs or help lists it (click's lazy
group pattern), so ``tuneledger mcp`` or ``tuneledger sql`` does not import the others'
modules, the use cases and the event models they need (docs/mcp.md, Start-up). A new command
is a module here and a line in this mapping.
"""

from __future__ import annotations

from importlib import import_module

import click

COMMANDS: dict[str, str] = {
    "init": "ledger.cli.commands.init:init",
    "append": "ledger.cli.commands.append:append",
    "propose": "ledger.cli.commands.board_verbs:propose",
    "triage": "ledger.cli.commands.board_verbs:triage",
    "decide": "ledger.cli.commands.board_verbs:decide",
    "events": "ledger.cli.commands.events:events",
    "show": "ledger.cli.commands.events:show",
    "sql": "ledger.cli.commands.sql:sql",
    "types": "ledger.cli.commands.sql:list_types",
    "views": "ledger.cli.commands.sql:list_views",
    "import": "ledger.cli.commands.import_files:import_",
    "export": "ledger.cli.commands.export:export",
    "demo": "ledger.cli.commands.demo:demo",
    "resident": "ledger.cli.commands.resident:resident",
    "research": "ledger.cli.commands.research:research_command",
}


def load(name: str) -> click.Command:
    """The core command ``name`` (a key of ``COMMANDS``), imported now."""
    module, _, attr = COMMANDS[name].partition(":")
    command = getattr(import_module(module), attr)
    assert isinstance(command, click.Command) and command.name == name, COMMANDS[name]
    return command
