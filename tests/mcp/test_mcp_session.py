"""An agent's first session through ``tuneledger mcp`` alone: the SDK's stdio client drives the
server as a subprocess, against a real ``transformers serve`` of a tiny random-weight Qwen3-MoE.

Part 1 is the README's "Your first session" through tools only (init, session, a researched
flag, a server started, a benchmark, the server stopped, the plan, the deltas, the decision
log), and its Markdown log is compared with the CLI walkthrough's (the README's shell blocks,
run once for this test and tests/project/test_readme_walkthrough.py by
tests/support/readme_walkthrough.py): the same document up to what a measurement changes (ids, times, numbers, verdicts). Part 2 goes on as an agent does: the
verdicts read, a triage made on a stale board while a person triaged from the CLI (a conflict
with the new state, then the retry), a decision citing the plan's comparisons, the decision log
read as a resource. The ledger's events and the tools' structured outputs are asserted; when
the client leaves, the server stops and nothing is left running.

Needs torch and transformers[serving] (the e2e extra), offline (the model is built locally).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ledger.store import LedgerStore
from schemas.vocab import COMPARISON_VERDICTS, VERDICTS
from tests.support import needs
from tests.support.mcp_client import call, over_stdio, refused
from tests.support.readme_walkthrough import Walkthrough, user_environment

#: Process-based on purpose (an MCP server process, real servers), the engine tier: `make test-engines` runs it.
pytestmark = [
    pytest.mark.anyio,
    pytest.mark.slow,
    pytest.mark.engine("torch", "transformers", "fastapi"),
]

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SESSION = "tiny-moe-cb"
CB = "flag:continuous-batching"


def _env() -> dict[str, str]:
    env = user_environment()  # as the README walkthrough's: the comparison is of like with like
    env.update({"PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}", "TUNELEDGER_RESIDENT": "0"})
    return env


def _cli_log(walked: Walkthrough) -> str:
    """The decision log of the README's first session run by bash (``tests/support/readme_walkthrough.py``:
    one run for this test and the README's), its decisions' actor written as the agent's: the
    user's walkthrough appends as ``person:`` and the login name, the agent as ``agent:mcp``."""
    assert walked.returncode == 0, walked.stderr[-4000:]
    log = (walked.folder / "first-session-decisions.md").read_text()
    return re.sub(r"\bby person:[^\s*]+", "by agent:mcp", log)


# --- the Markdown log up to what a measurement changes ----------------------------------------

_VERDICT_WORDS = "|".join(sorted(set(COMPARISON_VERDICTS) | set(VERDICTS), key=len, reverse=True))
_MASKS = [
    (re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), "<id>"),
    (re.compile(r"`[0-9a-f]{4,}(-[0-9a-f]+)?`"), "`<id>`"),  # the log's short event ids
    (re.compile(r"-\d{8}T\d{6}-[0-9a-f]{6}\b"), "-<run>"),  # a server run id's time and suffix
    (re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:\d\d)?"), "<time>"),
    (re.compile(rf"\b({_VERDICT_WORDS})\b"), "<verdict>"),
    # the triage status and the decision follow the verdict at c=4 (the README's `case`), so
    # noise decides them too: two runs of one session may accept and defer
    (re.compile(r"\b(accepted|rejected|deferred)\b"), "<status>"),
    (re.compile(r"[+-]?\d[\d,]*(\.\d+)?"), "<n>"),
]


def _masked(line: str, folder: Path) -> str:
    line = line.replace(str(folder), "<dir>")
    for pattern, placeholder in _MASKS:
        line = pattern.sub(placeholder, line)
    return line


def _cells(line: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def shape(markdown: str, folder: Path) -> dict[str, Any]:
    """What the decision log says once measured values are masked: per section, its text lines
    and its tables' header and leading cells (the rows' identity: config, load, metric...).
    Measured outcomes are left out where they add or remove lines: a measured flag verdict
    (a row of Flag verdicts, a finding in the timeline's counts) exists only when the plan's
    verdicts agree at every concurrency, metrics of one change are one verdict row only when
    their changes agree (an invalid run keeps them apart), and which arms are on the Pareto
    front is what the measurements say: noise decides all three."""
    sections: dict[str, Any] = {}
    name = "header"
    pareto = False
    for line in markdown.splitlines():
        if "-pareto.svg" in line:  # the picture beside an `export -o` file: no resource has one
            continue
        if line.startswith("## "):
            name, pareto = line[3:], False
            continue
        if not line.strip():
            continue
        section = sections.setdefault(name, {"text": [], "rows": []})
        if line.startswith("|"):
            cells = [_masked(c, folder) for c in _cells(line)]
            if name == "Flag verdicts":
                cells = cells[:1]  # the flags researched; a measured verdict changes the rest
            elif name == "Timeline" and "finding_recorded" in cells:
                continue
            elif name == "Verdicts":
                cells = cells[:2]  # the arm and its load
            elif name in ("Triage", "Server runs", "Benchmark deltas"):
                cells = cells[:3]
            if pareto or cells in section["rows"]:
                continue
            section["rows"].append(cells)
        else:
            pareto = line.startswith("Pareto front")
            line = re.sub(r" \(\d+ other arm\(s\) are beaten[^)]*\)", "", line)
            section["text"].append(_masked(line, folder))
    return sections


# --- the session -----------------------------------------------------------------------------

Progress = list[tuple[float, float | None, str | None]]


async def _readme_session(client: Any, progress: Progress) -> dict[str, Any]:
    """Part 1: the README's first session, through tools only; returns what part 2 cites."""

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    assert (await call(client, "init_ledger"))["created"] is True
    await call(
        client,
        "record",
        {
            "type": "session_started",
            "fields": {
                "title": "Continuous batching on a tiny MoE",
                "model": "models/tiny-qwen3-moe",
            },
        },
    )
    research = await call(
        client,
        "research_flags",
        {
            "engine": "sglang==0.5.23",
            "arch": "sm120",
            "tp": 4,
            "model_config": "examples/models/qwen3_5_moe/config.json",
            "flags": "--enable-flashinfer-allreduce-fusion",
        },
    )
    fusion = next(f for f in research["flags"] if f["flag"] == "enable-flashinfer-allreduce-fusion")
    assert fusion["verdict"] == "incompatible" and research["recorded"]
    researched = await call(
        client,
        "record",
        {
            "type": "flag_researched",
            "fields": {
                "flag": "continuous-batching",
                "verdict": "unknown",
                "what_it_does": "transformers serve batches concurrent requests into one forward pass",
            },
        },
    )
    server = await call(
        client, "start_server", {"config": "baseline", "configs": "examples/servers-cpu.toml"}
    )
    assert server["base_url"] == f"http://127.0.0.1:{server['port']}"
    running = (await call(client, "running_servers"))["servers"]
    assert [s["run_id"] for s in running] == [server["run_id"]]
    bench = await call(
        client,
        "run_bench",
        {
            "url": server["base_url"],
            "input_len": 16,
            "output_len": 8,
            "num_prompts": 32,
            "concurrency": [1],
            "tokenizer": "models/tiny-qwen3-moe",
            "config_name": "baseline",
        },
        progress_callback=on_progress,
    )
    assert [(r["config_name"], r["concurrency"], r["completed"]) for r in bench["runs"]] == [
        ("baseline", 1, 32)
    ]
    stopped = await call(client, "stop_server", {"run_id": server["run_id"]})
    assert stopped["event_type"] == "server_stopped" and stopped["already_ended"] is False
    progress.clear()
    plan = await call(
        client, "run_plan", {"plan_file": "examples/plan.toml"}, progress_callback=on_progress
    )
    deltas = await call(
        client,
        "sql",
        {
            "query": (
                "SELECT config_name, concurrency, metric, round(change_pct, 1) AS change_pct, verdict "
                "FROM benchmark_deltas WHERE metric = 'output_throughput' ORDER BY concurrency"
            )
        },
    )
    throughput = [v for v in plan["verdicts"] if v["metric"] == "output_throughput"]
    assert [(v["config_name"], v["concurrency"]) for v in throughput] == [
        ("continuous-batching", 1),
        ("continuous-batching", 4),
    ]
    assert all(
        v["verdict"] in COMPARISON_VERDICTS and v["baseline_runs"] == v["runs"] == 3
        for v in plan["verdicts"]
    )
    assert plan["runs"] == 12 and plan["missing"] == [] and plan["session_id"] == SESSION
    assert [(d["concurrency"], d["verdict"]) for d in deltas["rows"]] == [
        (v["concurrency"], v["verdict"]) for v in throughput
    ]
    # progress: one notification per step, values growing, the total the plan's arm sweeps
    values = [p[0] for p in progress]
    assert len(progress) >= 6 and values == sorted(values) and len(set(values)) == len(values)
    assert any(p[1] == 6 for p in progress) and any("repeat 3/3" in (p[2] or "") for p in progress)
    # the README's triage and decision: what the verdict at c=4 supports
    at4 = next(v for v in throughput if v["concurrency"] == 4)
    status = {"improved": "accepted", "regressed": "rejected"}.get(at4["verdict"], "deferred")
    read = next(r for r in (await call(client, "board"))["rows"] if r["candidate_id"] == CB)
    await call(
        client,
        "triage_candidate",
        {
            "candidate_id": CB,
            "status": status,
            "reason": f"output throughput at c=4: {at4['verdict']}",
            "expected_version": read["stream_version"],
        },
    )
    await call(
        client,
        "record_decision",
        {
            "decision": f"Continuous batching: {status}",
            "candidate_id": CB,
            "rationale": f"The triage: output throughput at c=4: {at4['verdict']}.",
            "evidence_event_ids": [at4["event_id"]],
        },
    )
    return {"server": server, "researched": researched, "throughput": throughput}


async def _agent_goes_on(client: Any, ledger: Path, cited: dict[str, Any]) -> str:
    """Part 2: the verdicts, a triage racing a person's, a decision; returns the final log."""
    verdicts = (await call(client, "flag_verdicts", {"flag": "continuous-batching"}))["rows"]
    assert {v["basis"] for v in verdicts} <= {"researched", "measured"}
    read = next(r for r in (await call(client, "board"))["rows"] if r["candidate_id"] == CB)
    person = subprocess.run(
        [
            str(BIN / "tuneledger"),
            "--ledger",
            str(ledger),
            "--actor",
            "person:ana",
            "append",
            "candidate_triaged",
            "-f",
            f"candidate_id={CB}",
            "-f",
            "status=deferred",
            "-f",
            "reason=let me look at TPOT first",
            "--expected-version",
            str(read["stream_version"]),
        ],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert person.returncode == 0, person.stderr  # the MCP server does not hold the ledger
    stale = await refused(
        client,
        "triage_candidate",
        {"candidate_id": CB, "status": "accepted", "expected_version": read["stream_version"]},
    )
    assert stale["error"]["exit_code"] == 4 and stale["candidate"]["status"] == "deferred"
    accepted = await call(
        client,
        "triage_candidate",
        {
            "candidate_id": CB,
            "status": "accepted",
            "reason": "throughput at c=4 decides it",
            "expected_version": stale["candidate"]["stream_version"],
        },
    )
    assert accepted["candidate"]["status"] == "accepted"
    evidence = [v["event_id"] for v in cited["throughput"]] + [cited["researched"]["event_id"]]
    decision = await call(
        client,
        "record_decision",
        {
            "decision": "Serve with --continuous-batching at concurrency > 1",
            "rationale": "the plan's output throughput comparisons",
            "candidate_id": CB,
            "alternatives": ["no batching"],
            "evidence_event_ids": [_unique_prefix(e, ledger) for e in evidence],
        },
    )
    types = [e["type"] for e in decision["evidence"]]
    assert types == ["comparison_completed"] * 2 + ["flag_researched"]
    uri = f"tuneledger://session/{SESSION}/decision-log"
    return str((await client.read_resource(uri)).contents[0].text)  # type: ignore[union-attr]


def _unique_prefix(event_id: str, ledger: Path) -> str:
    """The shortest prefix of ``event_id`` (12 characters at least) that no other event shares:
    UUIDv7 ids begin with their millisecond, so events recorded together share 12 characters
    and the tool rightly refuses such a prefix as ambiguous."""
    ids = LedgerStore(ledger).query_arrow("SELECT CAST(event_id AS VARCHAR) AS id FROM events")
    others = [i for i in ids.column("id").to_pylist() if i != event_id]
    n = 12
    while any(i.startswith(event_id[:n]) for i in others):
        n += 1
    return event_id[:n]


def _check_ledger(ledger: Path, final_log: str, base_url: str) -> None:
    """The events the session left, and the log as the CLI exports it."""
    assert "Serve with --continuous-batching at concurrency > 1" in final_log
    assert "comparison_completed" in final_log.split("## Triage")[0]
    exported = subprocess.run(
        [
            str(BIN / "tuneledger"),
            "--ledger",
            str(ledger),
            "export",
            "markdown",
            "--session",
            SESSION,
        ],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert exported.stdout == final_log
    store = LedgerStore(ledger)
    counts = {
        r["type"]: r["n"]
        for r in store.query_arrow(
            "SELECT type, count(*) AS n FROM events GROUP BY type"
        ).to_pylist()
    }
    assert counts["server_started"] == counts["server_stopped"] == 1 + 2 * 3  # nothing left running
    assert counts["benchmark_completed"] == 1 + 12 and counts["candidate_triaged"] == 3
    by_agent = (
        store.query_arrow(
            "SELECT type FROM events WHERE actor_kind = 'agent' AND actor_name = 'mcp' ORDER BY seq"
        )
        .column("type")
        .to_pylist()
    )
    # the research step records a flag_researched per flag it shows: one entry here
    assert [
        t for i, t in enumerate(by_agent) if t != "flag_researched" or by_agent[i - 1] != t
    ] == [
        "session_started",
        "flag_researched",
        "candidate_triaged",
        "decision_recorded",
        "candidate_triaged",
        "decision_recorded",
    ]
    sources = (
        store.query_arrow("SELECT source FROM benchmarks ORDER BY seq").column("source").to_pylist()
    )
    assert sources[0].startswith(f"tuneledger run bench --url {base_url} ")
    assert set(sources[1:]) == {"examples/plan.toml"}
    left = store.query_arrow("SELECT count(*) AS n FROM server_runs WHERE status <> 'stopped'")
    assert left.to_pylist() == [{"n": 0}]


async def test_an_agent_runs_the_first_session_through_mcp_tools(
    tmp_path: Path, readme_walkthrough_run: Walkthrough
) -> None:
    needs.program("transformers", BIN)
    from tests.support.tiny_model import build_tiny_model

    cli_dir, mcp_dir = readme_walkthrough_run.folder, tmp_path / "mcp"
    mcp_dir.mkdir()
    cli_log = _cli_log(readme_walkthrough_run)
    build_tiny_model(mcp_dir / "models" / "tiny-qwen3-moe")
    (mcp_dir / "examples").symlink_to(ROOT / "examples")
    ledger = mcp_dir / "first-session.duckdb"
    progress: Progress = []
    transcript: list[dict[str, Any]] = []  # written beside the ledger (docs/mcp.md's transcript)
    async with over_stdio(
        ledger, "--session", SESSION, cwd=mcp_dir, env=_env(), transcript=transcript
    ) as client:
        cited = await _readme_session(client, progress)
        uri = f"tuneledger://session/{SESSION}/decision-log"
        mcp_log = (await client.read_resource(uri)).contents[0].text  # type: ignore[union-attr]
        (mcp_dir / "mcp-decisions.md").write_text(mcp_log)  # beside the CLI's, to compare by eye
        assert shape(mcp_log, mcp_dir) == shape(cli_log, cli_dir)
        final_log = await _agent_goes_on(client, ledger, cited)
        (mcp_dir / "transcript.json").write_text(json.dumps(transcript, indent=1))
    _check_ledger(ledger, final_log, cited["server"]["base_url"])
