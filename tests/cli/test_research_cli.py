"""``tuneledger research`` and what it leaves in the ledger: ``flag_researched`` (basis
``source``) per flag shown, ``flag_verdicts`` answering per engine version, the Markdown log
citing file:line, and a later server run that sets a dead flag getting a finding."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ledger.read.flag_memory import remembered_findings
from ledger.store import LedgerStore
from schemas import Host, ServerStarted
from tests.support.cli_inprocess import invoke

FIXTURES = Path(__file__).parents[1] / "fixtures" / "research"
G1 = FIXTURES / "sglang_g1"
MODEL = FIXTURES / "models" / "foo_moe_top8.json"


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TUNELEDGER_RESEARCH_CACHE", str(tmp_path / "research-cache"))


def research(*args: str | Path, ledger: Path | None = None) -> tuple[int, str, str]:
    argv: list[str | Path] = ["--session", "s1", "research", "--engine", G1, "--arch", "sm120"]
    argv += ["--tp", "4", "--model-config", MODEL, *args]
    if ledger is not None:
        argv += ["--ledger", ledger]
    done = invoke(argv)
    return done.returncode, done.stdout, done.stderr


def test_json_for_agents() -> None:
    code, out, err = research("--flags", "--enable-arch-fusion --num-decode-steps 4", "--json")
    assert code == 0, err
    payload = json.loads(out)
    assert (payload["engine"], payload["version"]) == ("sglang", "0.0.1")
    flags = {f["flag"]: f for f in payload["flags"]}
    assert flags["enable-arch-fusion"]["verdict"] == "not-activated"
    assert flags["num-decode-steps"]["verdict"] == "dead-code"
    assert flags["num-decode-steps"]["value_given"] == 4
    assert all(e["ref"].startswith("sglang/srt/") for f in flags.values() for e in f["evidence"])


def test_text_names_version_target_and_unknown_flags() -> None:
    code, out, _ = research(
        "--flags", "--enable-mixed-chunk --speculative-algorithm NEXTN --enable-topk-fusoin"
    )
    assert code == 0
    assert out.startswith("sglang 0.0.1 (sha256 dir-")
    assert "on sm120, FooMoeForCausalLM, TP=4" in out.splitlines()[0]
    assert "--enable-mixed-chunk  overridden (proven) (given True)" in out
    assert "--enable-topk-fusoin  not defined in sglang 0.0.1 (nearest: --enable-topk-fusion" in out


def test_record_answers_flag_verdicts_for_that_version(ledger_path: Path) -> None:
    assert invoke(["init", "--ledger", ledger_path]).returncode == 0
    code, out, err = research("--flags", "--enable-arch-fusion", "--record", ledger=ledger_path)
    assert code == 0, err
    assert "recorded" in out and "0 already in the ledger" in out
    store = LedgerStore(ledger_path)
    rows = store.query_arrow(
        "SELECT flag, engine, engine_version, arch, verdict, basis, no_effect FROM flag_verdicts "
        "WHERE arch = 'sm120' AND no_effect ORDER BY flag"
    ).to_pylist()
    assert {
        "flag": "enable-arch-fusion",
        "engine": "sglang",
        "engine_version": "0.0.1",
        "arch": "sm120",
        "verdict": "not-activated",
        "basis": "source",
        "no_effect": True,
    } in rows
    assert {r["flag"] for r in rows} >= {"enable-arch-fusion", "num-decode-steps"}
    (event,) = [e for e in store.read(types=["flag_researched"]) if e.flag == "enable-arch-fusion"]
    assert event.basis == "source" and event.model_architecture == "FooMoeForCausalLM"
    assert event.tp_size == 4 and event.evidence[0].kind == "source"
    # the same research again: nothing new (the event ids come from what was researched)
    code, out, _ = research("--flags", "--enable-arch-fusion", "--record", ledger=ledger_path)
    assert code == 0 and "recorded 0 flag_researched" in out
    # the Markdown log cites the source
    export = ledger_path.parent / "log.md"
    assert invoke(["export", "markdown", "--ledger", ledger_path, "-o", export]).returncode == 0
    text = export.read_text()
    assert "`sglang/srt/layers/communicator.py:" in text


def test_a_run_setting_a_dead_flag_gets_a_finding(ledger_path: Path) -> None:
    assert invoke(["init", "--ledger", ledger_path]).returncode == 0
    assert research("--record", ledger=ledger_path)[0] == 0
    store = LedgerStore(ledger_path)
    # a log import with no arch and no engine version: dead code holds on every arch
    started = ServerStarted(
        run_id="r1", engine="sglang", flags={"num_decode_steps": 4, "tp_size": 4}
    )
    (finding,) = remembered_findings(store, started)
    assert finding.kind == "known-no-effect"
    assert "dead-code" in finding.message and "every arch" in finding.message
    assert "sglang 0.0.1 (this run's engine version is not known)" in finding.message
    # a run of another version: the research on 0.0.1 says nothing of it
    other = ServerStarted(
        run_id="r2",
        engine="sglang",
        flags={"num_decode_steps": 4},
        host=Host(compute_capability="sm120", engine="sglang", engine_version="0.0.9"),
    )
    assert remembered_findings(store, other) == []


def test_usage_and_input_errors(tmp_path: Path) -> None:
    done = invoke(["research", "--engine", G1], env={"PATH": ""})
    assert done.returncode == 2 and "give --arch" in done.stderr
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    done = invoke(["research", "--engine", G1, "--arch", "sm120", "--model-config", bad])
    assert done.returncode == 3 and str(bad) in done.stderr
    done = invoke(["research", "--engine", tmp_path / "none.whl", "--arch", "sm120"])
    assert done.returncode == 5 and "none.whl" in done.stderr
    done = invoke(["research", "--engine", G1, "--arch", "hopper"])
    assert done.returncode == 3 and "--arch 'hopper'" in done.stderr


def test_propose_puts_what_may_take_effect_on_the_board(ledger_path: Path) -> None:
    assert invoke(["init", "--ledger", ledger_path]).returncode == 0
    flags = "--enable-topk-fusion --enable-arch-fusion --chunked-prefill-size 4096"
    code, out, err = research("--flags", flags, "--propose", "--record", ledger=ledger_path)
    assert code == 0, err
    assert "proposed on the board: flag:chunked-prefill-size, flag:enable-topk-fusion" in out
    board = (
        LedgerStore(ledger_path)
        .query_arrow(
            "SELECT candidate_id, status, verdict, arch, engine_version FROM board ORDER BY candidate_id"
        )
        .to_pylist()
    )
    assert board == [
        {
            "candidate_id": "flag:chunked-prefill-size",
            "status": "proposed",
            "verdict": "effective",
            "arch": "sm120",
            "engine_version": "0.0.1",
        },
        {
            "candidate_id": "flag:enable-topk-fusion",
            "status": "proposed",
            "verdict": "conditional",
            "arch": "sm120",
            "engine_version": "0.0.1",
        },
    ]
    # again: already on the board, nothing proposed twice
    code, out, _ = research("--flags", flags, "--propose", ledger=ledger_path)
    assert code == 0 and "proposed on the board: none" in out


def test_a_missing_ledger_is_not_answered_with_an_option_research_lacks(tmp_path: Path) -> None:
    """The missing-ledger hint offered ``--create`` to ``research``, which has no such option."""
    missing = tmp_path / "none.duckdb"
    code, out, err = research("--flags", "--enable-arch-fusion", "--record", ledger=missing)
    assert (code, out) == (5, "")
    assert err.strip() == (
        f"tuneledger: error: no ledger at {missing} (create it with `tuneledger init`)"
    )
    assert not missing.exists()
