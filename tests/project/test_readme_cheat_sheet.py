"""The README's cheat sheet runs as written: every line of its first block (recording and
reading, on the demo ledger) exits 0 with the CLI in this process, and every command of its
second block (running and sharing: servers, GPUs, a hub) is a command of the CLI with those
options."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest

from ledger.cli.demo import build_demo
from ledger.cli.main import cli
from tests.support.cli_inprocess import invoke

ROOT = Path(__file__).resolve().parents[2]


def _blocks() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    start = readme.index("## Cheat sheet")
    end = readme.index("\n## ", start + 1)
    return re.findall(r"```sh\n(.*?)```", readme[start:end], flags=re.S)


def _commands(block: str) -> list[list[str]]:
    """Each command line of ``block`` as argv (continuations joined, comments dropped, ``&&``
    split); ``echo TEXT |`` before a command is kept as its first two words."""
    text = block.replace("\\\n", " ")
    commands = []
    for line in text.splitlines():
        words = shlex.split(line, comments=True)
        while words:
            cut = words.index("&&") if "&&" in words else len(words)
            commands.append(words[:cut])
            words = words[cut + 1 :]
    return [c for c in commands if c]


def test_the_cheat_sheet_records_and_reads_on_the_demo_ledger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record_and_read = _commands(_blocks()[0])
    assert any("decision_recorded" in c for c in record_and_read)
    assert any("candidate_triaged" in c for c in record_and_read)
    build_demo(tmp_path / "demo.duckdb")
    env: dict[str, str] = {}
    for argv in record_and_read:
        stdin = None
        if argv[0] == "export":
            env.update(dict(a.split("=", 1) for a in argv[1:]))
            continue
        if argv[0] == "echo":
            stdin, argv = argv[1], argv[3:]
        assert argv[0] == "tuneledger", argv
        done = invoke(argv[1:], stdin=stdin, cwd=tmp_path, env=env)
        assert done.returncode == 0, (argv, done.stderr)
    decisions = (tmp_path / "demo-decisions.md").read_text()
    assert "Keep the default chunked prefill" in decisions


def test_the_cheat_sheets_other_commands_exist() -> None:
    for argv in _commands(_blocks()[1]):
        assert argv[0] == "tuneledger", argv
        group: click.Command = cli
        words = argv[1:]
        ctx = click.Context(cli, info_name="tuneledger")
        while isinstance(group, click.Group) and words and not words[0].startswith("-"):
            sub = group.get_command(ctx, words[0])
            assert sub is not None, f"{argv}: no command {words[0]!r}"
            ctx = click.Context(sub, info_name=words[0], parent=ctx)
            group, words = sub, words[1:]
        known = {opt for p in group.params for opt in getattr(p, "opts", [])}
        for word in words:
            if word.startswith("--"):
                assert word.split("=")[0] in known, f"{argv}: {group.name} has no {word}"
