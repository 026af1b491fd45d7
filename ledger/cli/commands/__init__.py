"""The core commands of ``tuneledger``, one module each: options, one library call, print.

``COMMANDS`` is what ``ledger.cli.main`` registers on the root group; a new command is a
module here and a line in this list.
"""

from __future__ import annotations

import click

from ledger.cli.commands.append import append
from ledger.cli.commands.board_verbs import decide, propose, triage
from ledger.cli.commands.demo import demo
from ledger.cli.commands.events import events, show
from ledger.cli.commands.export import export
from ledger.cli.commands.import_files import import_
from ledger.cli.commands.init import init
from ledger.cli.commands.research import research_command
from ledger.cli.commands.resident import resident
from ledger.cli.commands.sql import list_types, list_views, sql

COMMANDS: tuple[click.Command, ...] = (
    init,
    append,
    propose,
    triage,
    decide,
    events,
    show,
    sql,
    list_types,
    list_views,
    import_,
    export,
    demo,
    resident,
    research_command,
)
