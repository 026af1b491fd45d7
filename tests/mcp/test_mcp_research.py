"""``research_flags``: ``tuneledger research`` as an MCP tool, on a synthetic engine tree
(tests/fixtures/research): the same verdicts and the same recorded events as the CLI's."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.store import LedgerStore
from tests.support.cli_inprocess import invoke
from tests.support.mcp_client import call, in_process, refused

pytestmark = pytest.mark.anyio

FIXTURES = Path(__file__).parents[1] / "fixtures" / "research"
ARGS = {
    "engine": str(FIXTURES / "sglang_g1"),
    "arch": "sm120",
    "tp": 4,
    "model_config": str(FIXTURES / "models" / "foo_moe_top8.json"),
    "flags": "--enable-arch-fusion --num-decode-steps 4 --enable-topk-fusoin",
}


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TUNELEDGER_RESEARCH_CACHE", str(tmp_path / "research-cache"))


def _researched(path: Path) -> list[tuple[str, str, str]]:
    return sorted(
        (e.flag, e.verdict, str(e.event_id))
        for e in LedgerStore(path).read(types=["flag_researched"])
    )


async def test_research_flags_answers_and_records_as_the_cli_does(tmp_path: Path) -> None:
    by_mcp, by_cli = tmp_path / "mcp.duckdb", tmp_path / "cli.duckdb"
    for path in (by_mcp, by_cli):
        assert invoke(["init", "--ledger", path]).returncode == 0
    async with in_process(by_mcp, session="s1") as client:
        out = await call(client, "research_flags", {**ARGS, "propose": True})
        again = await call(client, "research_flags", ARGS)
    flags = {f["flag"]: f for f in out["flags"]}
    assert flags["enable-arch-fusion"]["verdict"] == "not-activated"
    assert flags["num-decode-steps"]["verdict"] == "dead-code"
    assert all(e["ref"].startswith("sglang/srt/") for f in flags.values() for e in f["evidence"])
    assert out["unknown_flags"][0]["flag"] == "enable-topk-fusoin"
    assert out["recorded"] and not any(r["duplicate"] for r in out["recorded"])
    assert all(r["duplicate"] for r in again["recorded"])  # the same research: nothing new
    assert out["proposed"] == []  # neither flag given can take effect on sm120 here
    cli = invoke(
        [
            "--ledger", by_cli, "--session", "s1", "--actor", "agent:mcp", "research",
            "--engine", ARGS["engine"], "--arch", "sm120", "--tp", "4",
            "--model-config", ARGS["model_config"], "--flags", ARGS["flags"], "--record",
        ]
    )  # fmt: skip
    assert cli.returncode == 0, cli.stderr
    assert _researched(by_mcp) == _researched(by_cli)  # same verdicts, same derived ids


async def test_research_flags_refusals_carry_the_exit_codes(tmp_path: Path) -> None:
    path = tmp_path / "l.duckdb"
    assert invoke(["init", "--ledger", path]).returncode == 0
    async with in_process(path) as client:
        not_engine = await refused(client, "research_flags", {**ARGS, "engine": str(tmp_path)})
        no_model = await refused(
            client, "research_flags", {**ARGS, "model_config": str(tmp_path / "none.json")}
        )
        bad_arch = await refused(client, "research_flags", {**ARGS, "arch": "sm1x"})
        no_engine = await refused(client, "research_flags", {"arch": "sm120"})
    assert not_engine["error"]["exit_code"] == 3  # as the CLI: not an engine's source
    assert no_model["error"]["exit_code"] == 5
    assert bad_arch["error"]["exit_code"] == 3
    assert no_engine["error"]["exit_code"] == 3 and "engine" in no_engine["error"]["message"]
    assert LedgerStore(path).head() == 0


async def test_research_flags_runs_as_a_job_and_a_retry_appends_nothing_new(
    tmp_path: Path,
) -> None:
    """A cold cache downloads and reads a wheel for a minute and more: start_job runs it in the
    background, and a retried research (the same arguments) appends no new event."""
    path = tmp_path / "l.duckdb"
    assert invoke(["init", "--ledger", path]).returncode == 0
    async with in_process(path, session="s1") as client:
        outs = []
        for _ in range(2):
            job = await call(client, "start_job", {"tool": "research_flags", "arguments": ARGS})
            done = await call(client, "job_status", {"job_id": job["job_id"], "wait_s": 50})
            assert done["state"] == "done", done
            outs.append(done["result"])
    first, retry = outs
    assert first["recorded"] and not any(r["duplicate"] for r in first["recorded"])
    assert [r["event_id"] for r in retry["recorded"]] == [r["event_id"] for r in first["recorded"]]
    assert all(r["duplicate"] for r in retry["recorded"])
    assert LedgerStore(path).head() == len(first["recorded"])
