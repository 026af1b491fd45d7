"""``tuneledger resident status|stop``: this user's resident process (docs/cli.md)."""

from __future__ import annotations

import os

import click

from ledger import resident_socket


@click.group()
def resident() -> None:
    """The resident process that serves `tuneledger append` (docs/cli.md).

    \b
    Started by the first append that finds none; exits after TUNELEDGER_RESIDENT_IDLE_S
    (default 60) idle seconds. TUNELEDGER_RESIDENT=0 turns it off.
    """


@resident.command(name="status")
def resident_status() -> None:
    """Say whether this user's resident process (of this install) runs: its pid and calls."""
    if os.environ.get(resident_socket.ENV_SWITCH, "1") == "0":
        click.echo(f"resident process: off ({resident_socket.ENV_SWITCH}=0)")
        return
    folder = resident_socket.runtime_dir()
    problem = resident_socket.private_dir_problem(folder)
    if problem:
        click.echo(f"resident process: off: its folder {folder} {problem}; appends run in-process")
        return
    answer = resident_socket.ask_server("status")
    path = resident_socket.socket_path(folder, resident_socket.identity())
    if answer is None:
        click.echo(f"resident process: not running (socket {path})")
    else:
        click.echo(f"resident process: pid {answer[1]}, {answer[2]} calls served (socket {path})")


@resident.command(name="stop")
def resident_stop() -> None:
    """Stop this user's resident process (the next append starts a fresh one)."""
    answer = resident_socket.ask_server("stop")
    click.echo("resident process: not running" if answer is None else f"stopped pid {answer[1]}")
