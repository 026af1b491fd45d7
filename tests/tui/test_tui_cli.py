"""``tuneledger tui`` and the demo's opener, found through the entry points the core reads."""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path

from tests.support.cli_inprocess import invoke

ROOT = Path(__file__).resolve().parents[2]


def test_entry_points_resolve_to_the_tui() -> None:
    from tui.app import open_tui
    from tui.cli import tui_command

    [opener] = [e for e in entry_points(group="tuneledger.tui_opener") if e.name == "open"]
    assert opener.load() is open_tui
    [command] = [e for e in entry_points(group="tuneledger.commands") if e.name == "tui"]
    assert command.load() is tui_command


def test_tui_command_help_and_missing_ledger(tmp_path: Path) -> None:
    out = invoke(["tui", "--help"], cwd=ROOT)
    assert out.returncode == 0 and "--session" in out.stdout and "--ledger" in out.stdout
    missing = tmp_path / "nope.duckdb"
    out = invoke(["--ledger", str(missing), "tui"], cwd=ROOT)
    assert out.returncode == 5, out.stderr
    assert "no ledger at" in out.stderr and not missing.exists()


def test_tui_command_passes_ledger_session_and_actor(tmp_path: Path, monkeypatch) -> None:
    """The group's --ledger/--actor/--session reach open_tui; the command's own options win."""
    import click.testing

    import tui.app
    import tui.cli
    from ledger.cli.main import _register_plugin_commands, cli

    _register_plugin_commands()
    calls = []
    monkeypatch.setattr(
        tui.app, "open_tui", lambda path, session, actor=None: calls.append((path, session, actor))
    )
    # CliRunner gives no terminal; refusing to start without one is tested in test_cli.py.
    monkeypatch.setattr(tui.cli, "has_terminal", lambda: True)
    ledger = tmp_path / "l.duckdb"
    ledger.touch()
    runner = click.testing.CliRunner()
    result = runner.invoke(
        cli, ["--ledger", str(ledger), "--actor", "agent:x", "--session", "s1", "tui"]
    )
    assert result.exit_code == 0, result.output
    other = tmp_path / "m.duckdb"
    other.touch()
    result = runner.invoke(
        cli, ["--ledger", str(ledger), "tui", "--ledger", str(other), "--session", "s2"]
    )
    assert result.exit_code == 0, result.output
    assert [(Path(p).name, s) for p, s, _ in calls] == [("l.duckdb", "s1"), ("m.duckdb", "s2")]
    assert (calls[0][2].kind, calls[0][2].name) == ("agent", "x")
