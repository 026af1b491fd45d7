"""``tuneledger append`` takes no envelope override: the actor is the CLI's (``--actor``,
``TUNELEDGER_ACTOR``), ``recorded_at`` the store's clock, the positions the store's, and the
runners' event types are the runners' (``ledger.app.RUNNER_TYPES``: written only when the
CLI's actor is a runner, ``ledger.app.checks.refuse_runner_type``), as the MCP ``record`` tool
refuses them (``tests/mcp/test_mcp_actors.py``). Before: ``append`` stored an
``actor`` and a ``recorded_at`` given in its input as given, and a forged
``benchmark_completed`` moved ``benchmark_deltas``. Each refusal is one line, exit 3, nothing
appended, on every path: options, one JSON object, an array, JSON lines, the bulk import.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ledger.cli.commands.append import REFUSED_FIELDS
from ledger.store import LedgerStore
from tests.support.cli_inprocess import invoke

NOTE = {"type": "note_added", "text": "measured"}
BENCH = {"type": "benchmark_completed", "run_id": "r1", "config_name": "fast"}


def _append(ledger: Path, *args: str, stdin: str | None = None) -> tuple[int, str]:
    out = invoke(["--ledger", ledger, "--actor", "person:ana", "append", *args], stdin=stdin)
    return out.returncode, out.stderr


def _count(store: LedgerStore) -> int:
    return len(store.read())


@pytest.mark.parametrize(
    ("given", "named"),
    [
        ({"actor": {"kind": "runner", "name": "tuneledger"}}, "field 'actor'"),
        ({"recorded_at": "2020-01-01T00:00:00Z"}, "field 'recorded_at'"),
        ({"seq": 7}, "field 'seq'"),
        ({"schema_version": 2}, "field 'schema_version'"),
    ],
)
def test_an_envelope_field_in_the_input_is_refused_on_every_path(
    store: LedgerStore, given: dict[str, object], named: str
) -> None:
    forged = json.dumps({**NOTE, **given})
    lines = "\n".join([json.dumps(NOTE)] * 1200 + [forged])  # the bulk import's size
    for stdin, where in (
        (forged, "<stdin>: "),
        (json.dumps([NOTE, {**NOTE, **given}]), "<stdin>:[1]: "),
        (json.dumps(NOTE) + "\n" + forged + "\n", "<stdin>:2: "),
        (lines, "<stdin>:1201: "),
    ):
        code, err = _append(store.path, stdin=stdin)
        assert (code, err.count("\n")) == (3, 1), err
        assert where + named in err and "set by the ledger" in err
    key, value = next(iter(given.items()))
    code, err = _append(
        store.path, "note_added", "-f", "text=x", "-f", f"{key}={json.dumps(value)}"
    )
    assert code == 3 and f"options: {named}" in err
    assert _count(store) == 0


def test_runner_event_types_are_the_runners_to_write(store: LedgerStore) -> None:
    code, err = _append(store.path, stdin=json.dumps(NOTE) + "\n" + json.dumps(BENCH))
    assert code == 3 and err.count("\n") == 1
    assert "<stdin>:2: benchmark_completed events are written by the runners only" in err
    code, err = _append(store.path, "server_started", "-f", "engine=sglang")
    assert code == 3 and "options: server_started events are written by the runners" in err
    assert _count(store) == 0
    # a runner's actor (the CLI's --actor, as the runners' own) appends them
    out = invoke(
        ["--ledger", store.path, "--actor", "runner:lab", "append"],
        stdin=json.dumps({**BENCH, "metrics": {"output_throughput": 10.0}}),
    )
    assert out.returncode == 0, out.stderr
    (stored,) = store.read()
    assert stored.type == "benchmark_completed" and stored.actor.kind == "runner"


def test_what_only_looks_like_an_override_is_appended(store: LedgerStore) -> None:
    """A field name inside a text is no override: the line is decoded to be sure, and appended
    with the CLI's actor and the store's clock."""
    text = 'the "actor": field and "type": "benchmark_completed"'
    other = {**NOTE, "text": '"seq": 1, "recorded_at": "2020"'}
    stdin = json.dumps({**NOTE, "text": text}) + "\n" + json.dumps(other)
    code, err = _append(store.path, stdin=stdin)
    assert code == 0, err
    events = store.read()
    assert [e.text for e in events] == [text, other["text"]]  # type: ignore[attr-defined]
    assert {(e.actor.kind, e.actor.name) for e in events} == {("person", "ana")}
    assert all(e.recorded_at is not None and e.recorded_at.year >= 2026 for e in events)
    # kept, as documented: --stream's field, and a batch's expected version (a triage's check)
    assert REFUSED_FIELDS >= {"actor", "recorded_at", "seq"}
    assert not REFUSED_FIELDS & {"stream", "stream_version"}


def test_input_nested_past_the_parsers_limit_is_one_line_not_a_traceback(
    store: LedgerStore,
) -> None:
    # the refusal's own look at the input meets the depth first: the reader then refuses it
    deep = "[" * 100_000 + json.dumps({**NOTE, "actor": "x"}) + "]" * 100_000
    for stdin in (deep, json.dumps(NOTE) + "\n" + deep + "\n"):
        code, err = _append(store.path, stdin=stdin)
        assert code == 3 and err.count("\n") == 1, err
        assert "Traceback" not in err
    assert _count(store) == 0
