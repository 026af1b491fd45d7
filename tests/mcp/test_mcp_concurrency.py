"""``tuneledger mcp`` beside the CLI, a kept-open writer and the TUI, on one ledger at once.

The MCP server is a writer like any other: every guarantee holds with it in the mix (gapless
``seq`` in commit order, each stream's versions gapless, expected versions enforced across
processes, one writer at a time through the store's hold and hand-off), and it does not hold
the DuckDB file between calls (DuckDB itself opens the file read-write right after a call). The
TUI shows what the agent writes, live, with no key pressed.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from ledger.cli.demo import DEMO_SESSION
from ledger.store import LedgerStore
from ledger.write import commands
from schemas import Actor, CandidateProposed
from tests.support.mcp_client import call, over_stdio
from tests.tui.pilot import SIZE, make_demo, wait_for, wait_loaded

#: Process-based on purpose (an MCP server, CLI and store writers in other processes, the TUI).
pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUNELEDGER_")}
    return {**env, "TUNELEDGER_RESIDENT": "0", **extra}


def _cli(ledger: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "tuneledger"), "--ledger", str(ledger), *args],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )


def _triage_race_cli(ledger: Path) -> subprocess.CompletedProcess[str]:
    return _cli(
        ledger,
        "--actor",
        "person:ana",
        "append",
        "candidate_triaged",
        "-f",
        "candidate_id=flag:race",
        "-f",
        "status=rejected",
        "--expected-version",
        "1",
    )


async def test_mcp_cli_and_kept_open_writers_keep_every_guarantee(tmp_path: Path) -> None:
    store = LedgerStore(tmp_path / "l.duckdb")
    store.init()
    commands.propose_candidate(
        store,
        CandidateProposed(
            candidate_id="flag:race",
            kind="flag",
            title="race",
            flag="race",
            actor=Actor.parse("person:ana"),
            session_id="s1",
        ),
    )
    go = tmp_path / "go"
    writer = [
        sys.executable,
        str(ROOT / "tests" / "store" / "writer_process.py"),
        "append",
        str(store.path),
    ]
    procs = [
        subprocess.Popen(
            [*writer, "--writer", f"store{i}", "--count", "12", "--go", str(go)],
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    # a long-lived writer that keeps the file open between its appends (a runner, the TUI's writes)
    procs.append(
        subprocess.Popen(
            [*writer, "--writer", "kept", "--count", "12", "--go", str(go)],
            env=_env(TUNELEDGER_TEST_HOLD_S="2"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    )
    cli_loop = subprocess.Popen(
        [
            "bash",
            "-c",
            f'for i in 1 2 3 4 5 6; do "{BIN}/tuneledger" --ledger "{store.path}" '
            'append note_added -f text="cli $i" || exit $?; done',
        ],
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    async with over_stdio(store.path, "--session", "s1", env=_env()) as client:
        go.touch()
        mine = [
            (
                await call(
                    client, "record", {"type": "note_added", "fields": {"text": f"agent {i}"}}
                )
            )["seq"]
            for i in range(12)
        ]
        # the triage race: the agent and a person triage at the same expected version
        cli_race, agent_race = await asyncio.gather(
            asyncio.to_thread(_triage_race_cli, store.path),
            client.call_tool(
                "triage_candidate",
                {"candidate_id": "flag:race", "status": "accepted", "expected_version": 1},
            ),
        )
        for proc in [*procs, cli_loop]:
            _, err = await asyncio.to_thread(proc.communicate, timeout=600)
            assert proc.returncode == 0, err
        last = await call(client, "record", {"type": "note_added", "fields": {"text": "after"}})
        # the MCP server holds nothing between calls: DuckDB itself opens the file read-write
        con = duckdb.connect(str(store.path))
        con.close()
    assert mine == sorted(mine)
    won = [agent_race.is_error is False, cli_race.returncode == 0]
    assert won.count(True) == 1, (cli_race.stderr, agent_race.content)
    if agent_race.is_error:
        assert agent_race.structured_content["error"]["exit_code"] == 4  # type: ignore[index]
        assert agent_race.structured_content["candidate"]["status"] == "rejected"  # type: ignore[index]
    else:
        assert cli_race.returncode == 4 and "conflict" in cli_race.stderr

    seqs = store.query_arrow("SELECT seq FROM events ORDER BY seq").column("seq").to_pylist()
    total = (
        1 + 2 * 12 + 12 + 6 + 12 + 1 + 1
    )  # proposal, store writers, kept, CLI, agent, race, last
    assert seqs == list(range(1, total + 1)) and last["seq"] == total
    streams = store.query_arrow(
        "SELECT stream, count(*) AS n, max(stream_version) AS v, min(stream_version) AS lo "
        "FROM events GROUP BY stream"
    ).to_pylist()
    assert all(s["n"] == s["v"] and s["lo"] == 1 for s in streams), streams
    triages = store.read(types=["candidate_triaged"])
    assert len(triages) == 1 and triages[0].stream_version == 2


async def test_the_tui_shows_the_agents_events_live(tmp_path: Path) -> None:
    from tui.app import TuneLedgerApp

    store = make_demo(tmp_path)
    version = store.query_arrow(
        "SELECT stream_version FROM board WHERE candidate_id = 'flag:cuda-graph-max-bs'"
    )["stream_version"][0].as_py()
    app = TuneLedgerApp(store.path, DEMO_SESSION, poll_s=60)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        async with over_stdio(
            store.path, "--session", DEMO_SESSION, "--actor", "agent:claude", env=_env()
        ) as client:
            await call(
                client,
                "record",
                {"type": "note_added", "fields": {"text": "written by the agent over MCP"}},
            )
            await wait_for(
                pilot,
                lambda: any(
                    "written by the agent over MCP" in r["summary"] for r in app.timeline.rows
                ),
                timeout=10,
                what="the agent's note in the timeline",
            )
            await call(
                client,
                "triage_candidate",
                {
                    "candidate_id": "flag:cuda-graph-max-bs",
                    "status": "accepted",
                    "expected_version": version,
                },
            )
            await call(
                client,
                "propose_candidate",
                {
                    "title": "try EAGLE",
                    "kind": "spec-decoding",
                    "candidate_id": "spec-decoding:eagle",
                },
            )
            await wait_for(
                pilot,
                lambda: (
                    {("flag:cuda-graph-max-bs", "accepted"), ("spec-decoding:eagle", "proposed")}
                    <= {(r["candidate_id"], r["status"]) for r in app.board.rows}
                ),
                timeout=10,
                what="the board to follow the agent",
            )
        shown = [r for r in app.timeline.rows if "written by the agent" in r["summary"]]
        assert shown and shown[0]["actor"] == "agent:claude"
