"""``tuneledger resident status|stop``: this user's resident process (docs/cli.md)."""

from __future__ import annotations

import os

import click

from ledger.frontdoor import channel


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
    if os.environ.get(channel.ENV_SWITCH, "1") == "0":
        click.echo(f"resident process: off ({channel.ENV_SWITCH}=0)")
        return
    folder = channel.runtime_dir()
    problem = channel.private_dir_problem(folder)
    if problem:
        click.echo(f"resident process: off: its folder {folder} {problem}; appends run in-process")
        return
    answer = channel.ask_server("status")
    path = channel.socket_path(folder, channel.identity())
    if answer is None:
        click.echo(f"resident process: not running (socket {path})")
    else:
        click.echo(f"resident process: pid {answer[1]}, {answer[2]} calls served (socket {path})")


@resident.command(name="stop")
def resident_stop() -> None:
    """Stop this user's resident process (the next append starts a fresh one)."""
    answer = channel.ask_server("stop")
    click.echo("resident process: not running" if answer is None else f"stopped pid {answer[1]}")
