"""Older schema versions are read as the current models; stored rows are never rewritten.

A v1 row is written straight into ``events`` as an older tuneledger would have written it,
then read through ``LedgerStore.read``/``get`` (Python upcasters) and through the views
(SQL upcasters). Each upcaster exists twice (Python and SQL); both must agree.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.errors import InvalidInput
from ledger.store import LedgerStore
from schemas import CURRENT_VERSIONS, Evidence, UpcastError, parse_event
from schemas.events import FlagResearched, NoteAdded
from schemas.upcasting import UPCASTERS, Upcaster, sql_upcast_expression, upcast
from schemas.vocab import COMPARISON_VERDICTS, LEGACY_COMPARISON_VERDICTS, VERDICTS

NOTE_ID = UUID("0a0a0a0a-1111-7000-8000-000000000001")
FLAG_ID = UUID("0b0b0b0b-2222-7000-8000-000000000002")
NOTE_V1 = '{"body": "the v1 note body", "refs": []}'
FLAG_V1 = '{"flag": "--enable-x", "finding": "turns x on for decode", "evidence": "a.py:12", "verdict": "no-op"}'
HOST = '{"gpu_name": "RTX PRO 6000", "compute_capability": "sm120", "engine": "sglang", "engine_version": "0.5.4"}'


def insert_raw(
    store: LedgerStore,
    *,
    event_id: UUID,
    type_: str,
    schema_version: int,
    payload: str,
    stream: str,
    host: str | None = None,
) -> None:
    """Write one row as an older tuneledger did: straight SQL, this version's payload."""
    with store.connect(read_only=False) as con:
        seq = con.execute("SELECT coalesce(max(seq), 0) + 1 FROM events").fetchall()[0][0]
        version = con.execute(
            "SELECT coalesce(max(stream_version), 0) + 1 FROM events WHERE stream = ?", [stream]
        ).fetchall()[0][0]
        con.execute(
            "INSERT INTO events (seq, event_id, type, schema_version, stream, stream_version, recorded_at, "
            "actor_kind, actor_name, session_id, source, host, payload) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, 'person', 'old-tuneledger', 'old', 'v1 import', ?, ?)",
            [
                seq,
                str(event_id),
                type_,
                schema_version,
                stream,
                version,
                datetime(2025, 3, 4, 5, 6, 7, tzinfo=UTC),
                host,
                payload,
            ],
        )
        # An older tuneledger had its own views and projections: the file says so, and
        # this version rebuilds them from the log when it next opens the file.
        con.execute("UPDATE ledger_meta SET value = 'older' WHERE key = 'views_version'")


def raw_rows(store: LedgerStore) -> list[dict[str, Any]]:
    """The stored v1 rows, every column as DuckDB's text of it."""
    table = store.query_arrow(
        "SELECT COLUMNS(*)::VARCHAR FROM events WHERE schema_version = 1 AND type IN ('note_added', 'flag_researched') "
        "ORDER BY seq"
    )
    return table.to_pylist()


@pytest.fixture
def old(store: LedgerStore) -> LedgerStore:
    """A ledger holding one v1 note and one v1 flag research, as an older tuneledger wrote them."""
    insert_raw(
        store,
        event_id=NOTE_ID,
        type_="note_added",
        schema_version=1,
        payload=NOTE_V1,
        stream="session:old",
    )
    insert_raw(
        store,
        event_id=FLAG_ID,
        type_="flag_researched",
        schema_version=1,
        payload=FLAG_V1,
        stream="flag:enable-x",
        host=HOST,
    )
    return store


# --- (a) read returns the current models ----------------------------------------------


def test_read_upcasts_v1_rows_to_the_current_models(old: LedgerStore) -> None:
    note, flag = old.read()
    assert isinstance(note, NoteAdded)
    assert (note.schema_version, note.text, note.refs) == (2, "the v1 note body", [])
    assert (note.seq, note.event_id, note.session_id, note.source) == (
        1,
        NOTE_ID,
        "old",
        "v1 import",
    )
    assert isinstance(flag, FlagResearched)
    assert flag.schema_version == 4
    assert flag.basis == "researched" and flag.arch is None and flag.conditions == []
    assert flag.flag == "enable-x"
    assert flag.what_it_does == "turns x on for decode"
    assert flag.evidence == [Evidence(kind="text", ref=None, text="a.py:12")]
    assert flag.verdict == "no-op"
    assert flag.host is not None and flag.host.compute_capability == "sm120"
    assert old.get(FLAG_ID) == flag
    assert old.get(str(NOTE_ID)[:13]) == note
    assert old.read(types=["flag_researched"]) == [flag]


# --- (b) the views show the upcast values -----------------------------------------------


def test_views_show_the_upcast_values(old: LedgerStore) -> None:
    summaries = old.query_arrow("SELECT seq, type, summary FROM timeline ORDER BY seq").to_pylist()
    assert summaries == [
        {"seq": 1, "type": "note_added", "summary": "note: the v1 note body"},
        {"seq": 2, "type": "flag_researched", "summary": "enable-x: no-op - turns x on for decode"},
    ]
    (verdict,) = old.query_arrow(
        "SELECT flag, engine, engine_version, arch, verdict, basis, no_effect, summary, "
        "evidence_event_id::VARCHAR AS evidence_event_id FROM flag_verdicts"
    ).to_pylist()
    assert verdict == {
        "flag": "enable-x",
        "engine": "sglang",
        "engine_version": "0.5.4",
        "arch": "sm120",
        "verdict": "no-op",
        "basis": "researched",
        "no_effect": True,
        "summary": "turns x on for decode",
        "evidence_event_id": str(FLAG_ID),
    }
    payloads = old.query_arrow("SELECT payload FROM live_events ORDER BY seq")[
        "payload"
    ].to_pylist()
    assert [json.loads(p) for p in payloads] == [
        {"text": "the v1 note body", "refs": []},
        {
            "flag": "enable-x",
            "what_it_does": "turns x on for decode",
            "verdict": "no-op",
            "evidence": [{"kind": "text", "ref": None, "text": "a.py:12"}],
            "basis": "researched",
            "conditions": [],
        },
    ]


def test_views_and_models_agree_with_current_version_events(old: LedgerStore) -> None:
    """A v2 event next to the upcast v1 one: the views read both the same way."""
    old.append(
        FlagResearched(
            flag="--enable-x",
            what_it_does="newer reading",
            verdict="effective",
            evidence=[Evidence(kind="source", ref="b.py:3")],
            host={"compute_capability": "12.0", "engine": "sglang", "engine_version": "0.5.4"},
        )
    )
    (row,) = old.query_arrow("SELECT verdict, findings, history FROM flag_verdicts").to_pylist()
    assert row == {
        "verdict": "effective",
        "findings": 2,
        "history": ["no-op (researched)", "effective (researched)"],
    }


# --- (c) the stored rows stay as they were ---------------------------------------------


def test_stored_v1_rows_are_never_rewritten(old: LedgerStore) -> None:
    before = raw_rows(old)
    assert [row["payload"] for row in before] == [NOTE_V1, FLAG_V1]
    old.read()
    old.get(FLAG_ID)
    for view in ("live_events", "timeline", "flag_verdicts", "flag_verdict_history", "board"):
        old.query_arrow(f"SELECT * FROM {view}")
    old.append(NoteAdded(text="a v2 note"))
    old.init()  # a writer refreshing the views must not touch old rows either
    assert raw_rows(old) == before
    assert old.query_arrow("SELECT count(*) AS n FROM events")["n"][0].as_py() == 3


# --- (e) a newer schema version than this code knows -----------------------------------


def test_a_newer_schema_version_is_a_clear_error(store: LedgerStore) -> None:
    future = UUID("0a0a0a0a-0000-7000-8000-00000000000f")
    insert_raw(
        store,
        event_id=future,
        type_="note_added",
        schema_version=3,
        payload='{"text": "x"}',
        stream="ledger",
    )
    with pytest.raises(InvalidInput) as caught:
        store.read()
    message = str(caught.value)
    assert "seq 1" in message and str(future) in message
    assert "note_added schema_version 3 is newer than this tuneledger (2)" in message
    with pytest.raises(InvalidInput, match="newer than this tuneledger"):
        store.get(future)
    with pytest.raises(UpcastError, match="schema_version 3 is newer"):
        parse_event({"type": "note_added", "schema_version": 3, "text": "x"})
    with pytest.raises(UpcastError, match="no upcaster for note_added from schema_version 0"):
        upcast("note_added", 0, {"body": "x"})


# --- (d) each upcaster: the Python function and the SQL expression agree ----------------


@pytest.fixture(scope="module")
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    connection = duckdb.connect()
    yield connection
    connection.close()


def sql_upcast(con: duckdb.DuckDBPyConnection, sql: str, payload: dict[str, Any]) -> dict[str, Any]:
    (out,) = con.execute(
        f"SELECT ({sql})::VARCHAR FROM (SELECT ?::JSON AS payload)", [json.dumps(payload)]
    ).fetchone()
    return json.loads(out)


def without_nulls(payload: dict[str, Any]) -> dict[str, Any]:
    """Top-level null == absent: JSON merge patch (the SQL side) cannot set a key to null,
    and every field a null can land in is optional (default ``None``) in the models."""
    return {k: v for k, v in payload.items() if v is not None}


def assert_same(
    con: duckdb.DuckDBPyConnection, upcaster: Upcaster, payload: dict[str, Any]
) -> None:
    python = upcaster.python(json.loads(json.dumps(payload)))
    sql = sql_upcast(con, upcaster.sql, payload)
    assert without_nulls(sql) == without_nulls(python), (payload, sql, python)
    if upcaster.from_version + 1 == CURRENT_VERSIONS[upcaster.type]:
        current = {"type": upcaster.type, "schema_version": upcaster.from_version + 1}
        as_model = [
            parse_event({**side, **current}).model_dump(exclude={"event_id"})
            for side in (sql, python)
        ]
        assert as_model[0] == as_model[1]


_text = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40
)
_flag_name = st.from_regex(r"[a-z0-9][a-z0-9_-]{0,30}", fullmatch=True)
_evidence_item = st.fixed_dictionaries(
    {"kind": st.sampled_from(["source", "log", "text", "url"])},
    optional={"ref": st.none() | _text, "text": st.none() | _text},
)

NOTE_V1_PAYLOADS = st.fixed_dictionaries(
    {"body": _text},
    optional={
        "refs": st.lists(st.uuids().map(str), max_size=3),
        "candidate_id": st.none() | _text,
    },
)
FLAG_V1_PAYLOADS = st.fixed_dictionaries(
    {
        "flag": st.tuples(st.sampled_from(["", "-", "--"]), _flag_name).map("".join),
        "verdict": st.sampled_from(VERDICTS),
    },
    optional={
        "finding": st.none() | _text,
        "evidence": st.none() | _text | st.lists(_evidence_item, max_size=3),
        "engine": st.none() | _text,
        "engine_version": st.none() | _text,
        "notes": st.none() | _text,
        "candidate_id": st.none() | _text,
    },
)
FLAG_V2_PAYLOADS = st.fixed_dictionaries(
    {"flag": _flag_name, "verdict": st.sampled_from(VERDICTS)},
    optional={
        "what_it_does": st.none() | _text,
        "evidence": st.lists(_evidence_item, max_size=3),
        "engine": st.none() | _text,
        "engine_version": st.none() | _text,
        "notes": st.none() | _text,
    },
)
FLAG_V3_PAYLOADS = st.fixed_dictionaries(
    {"flag": _flag_name, "verdict": st.sampled_from(VERDICTS), "basis": st.just("source")},
    optional={
        "arch": st.none() | st.just("sm120"),
        "conditions": st.lists(_text, max_size=2),
        "notes": st.none() | _text,
    },
)
_change = st.none() | st.floats(min_value=-0.999, max_value=50, allow_nan=False)
COMPARISON_V1_PAYLOADS = st.fixed_dictionaries(
    {
        "baseline_config": st.just("baseline"),
        "config_name": _text,
        "metric": st.sampled_from(
            ["output_throughput", "median_ttft_ms", "p99_tpot_ms", "completed", "not_a_metric"]
        ),
        "baseline_runs": st.integers(0, 9),
        "runs": st.integers(0, 9),
        "noise_threshold": st.floats(0, 1),
        "verdict": st.sampled_from([*COMPARISON_VERDICTS, *LEGACY_COMPARISON_VERDICTS]),
    },
    optional={
        "better_direction": st.sampled_from([1, -1]),
        "change": _change,
        "ci_low": _change,
        "ci_high": _change,
        "concurrency": st.none() | st.integers(1, 64),
    },
)
SPEC_V1_PAYLOADS = st.fixed_dictionaries(
    {"trial_id": _text, "algorithm": st.sampled_from(["EAGLE", "NGRAM"])},
    optional={
        "output_throughput_change": _change,
        "median_tpot_change": _change,
        "median_ttft_change": _change,
        "verdict": st.none() | st.sampled_from(VERDICTS),
    },
)
PAYLOADS = {
    ("note_added", 1): NOTE_V1_PAYLOADS,
    ("flag_researched", 1): FLAG_V1_PAYLOADS,
    ("flag_researched", 2): FLAG_V2_PAYLOADS,
    ("flag_researched", 3): FLAG_V3_PAYLOADS,
    ("comparison_completed", 1): COMPARISON_V1_PAYLOADS,
    ("spec_decoding_trial_completed", 1): SPEC_V1_PAYLOADS,
}


def test_every_upcaster_has_a_payload_strategy() -> None:
    assert {(u.type, u.from_version) for u in UPCASTERS} == set(PAYLOADS)


@pytest.mark.parametrize("upcaster", UPCASTERS, ids=lambda u: f"{u.type}-v{u.from_version}")
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_python_and_sql_upcasters_agree(
    con: duckdb.DuckDBPyConnection, upcaster: Upcaster, data: st.DataObject
) -> None:
    payload = data.draw(PAYLOADS[(upcaster.type, upcaster.from_version)])
    assert_same(con, upcaster, payload)


@pytest.mark.parametrize(
    "payload",
    [
        {"body": "plain"},
        {"body": "", "refs": [], "candidate_id": None},
        {"body": "quotes \" and \\ and 'single' and ünïcödé ✓ and\nnewlines"},
    ],
)
def test_note_upcaster_examples(con: duckdb.DuckDBPyConnection, payload: dict[str, Any]) -> None:
    (upcaster,) = [u for u in UPCASTERS if u.type == "note_added"]
    assert_same(con, upcaster, payload)
    assert sql_upcast(con, upcaster.sql, payload)["text"] == payload["body"]


@pytest.mark.parametrize(
    "payload",
    [
        {"flag": "--enable-x", "finding": "f", "evidence": "a.py:12", "verdict": "no-op"},
        {"flag": "enable_x", "verdict": "unknown"},
        {"flag": "-x", "evidence": None, "verdict": "effective"},
        {
            "flag": "--a_b_c",
            "evidence": [{"kind": "source", "ref": "x.py:1", "text": None}],
            "verdict": "harmful",
        },
    ],
)
def test_flag_upcaster_examples(con: duckdb.DuckDBPyConnection, payload: dict[str, Any]) -> None:
    (upcaster,) = [u for u in UPCASTERS if u.type == "flag_researched" and u.from_version == 1]
    assert_same(con, upcaster, payload)


@pytest.mark.parametrize("flag", [" --enable-x", "--enable-x ", "\t--enable_x\n"])
def test_flag_upcasters_agree_on_surrounding_whitespace(
    con: duckdb.DuckDBPyConnection, flag: str
) -> None:
    """normalize_flag (Python) strips whitespace first; the SQL upcaster must too."""
    (upcaster,) = [u for u in UPCASTERS if u.type == "flag_researched" and u.from_version == 1]
    payload = {"flag": flag, "verdict": "no-op"}
    assert (
        sql_upcast(con, upcaster.sql, payload)["flag"]
        == upcaster.python(payload)["flag"]
        == "enable-x"
    )


def test_view_expression_chains_to_the_python_result(con: duckdb.DuckDBPyConnection) -> None:
    """``sql_upcast_expression`` (what live_events uses) equals ``upcast`` for every type and version."""
    examples = {
        "note_added": {"body": "b"},
        "flag_researched": json.loads(FLAG_V1),
        "comparison_completed": json.loads(TTFT_V1),
        "spec_decoding_trial_completed": {
            "trial_id": "t",
            "algorithm": "NGRAM",
            "median_tpot_change": 0.25,
        },
    }
    for type_name, current in CURRENT_VERSIONS.items():
        for version in range(1, current):
            payload = examples[type_name]
            (out,) = con.execute(
                f"SELECT ({sql_upcast_expression('payload')})::VARCHAR "
                "FROM (SELECT ?::VARCHAR AS type, ?::INTEGER AS schema_version, ?::JSON AS payload)",
                [type_name, version, json.dumps(payload)],
            ).fetchone()
            assert without_nulls(json.loads(out)) == without_nulls(
                upcast(type_name, version, payload)
            )


# --- one sign convention: comparison_completed v1 (+ is better) reads as v2 (value / baseline - 1)

#: A v1 comparison as tuneledger <= this change stored it: TTFT 100 ms -> 80 ms, signed + is better
#: (baseline / value - 1 = +25%), CI [+20%, +30%], a spaced verdict spelling.
TTFT_V1 = (
    '{"baseline_config": "baseline", "config_name": "fast", "metric": "median_ttft_ms", '
    '"concurrency": 4, "better_direction": -1, "baseline_runs": 3, "runs": 3, '
    '"baseline_mean": 100.0, "mean": 80.0, "change": 0.25, "ci_low": 0.2, "ci_high": 0.3, '
    '"noise_threshold": 0.05, "verdict": "improved", "session_id": "old"}'
)


def test_a_v1_ttft_comparison_reads_as_the_metric_s_own_change(store: LedgerStore) -> None:
    """A stored v1 comparison says +25% for a TTFT that fell 100 -> 80 ms; read through the models
    and through the views it is -20% (value / baseline - 1), CI bounds flipped and swapped."""
    cid = UUID("0c0c0c0c-3333-7000-8000-000000000003")
    insert_raw(
        store,
        event_id=cid,
        type_="comparison_completed",
        schema_version=1,
        payload=TTFT_V1,
        stream="comparison:fast",
    )
    (event,) = store.read()
    assert event.schema_version == 2 and event.better_direction == -1
    assert event.change == pytest.approx(80.0 / 100.0 - 1)
    assert (event.ci_low, event.ci_high) == (
        pytest.approx(1 / 1.3 - 1),
        pytest.approx(1 / 1.2 - 1),
    )
    (row,) = store.query_arrow(
        "SELECT change_pct, ci_low_pct, ci_high_pct, verdict FROM benchmark_deltas"
    ).to_pylist()
    assert row["change_pct"] == pytest.approx(-20.0)
    assert row["ci_low_pct"] == pytest.approx(100 * (1 / 1.3 - 1))
    assert row["verdict"] == "improved"


@pytest.mark.parametrize(
    ("payload", "direction"),
    [
        ({"metric": "median_ttft_ms", "change": 0.25}, -1),  # no stated direction: the table's
        ({"metric": "output_throughput", "change": 0.25}, 1),
        ({"metric": "median_ttft_ms", "better_direction": 1, "change": 0.25}, 1),  # stated wins
    ],
)
def test_the_v1_direction_comes_from_the_event_else_the_metric_table(
    con: duckdb.DuckDBPyConnection, payload: dict[str, Any], direction: int
) -> None:
    (upcaster,) = [u for u in UPCASTERS if u.type == "comparison_completed"]
    for out in (upcaster.python(payload), sql_upcast(con, upcaster.sql, payload)):
        assert out["better_direction"] == direction
        assert out["change"] == pytest.approx(0.25 if direction == 1 else 1 / 1.25 - 1)


def test_legacy_verdict_spellings_read_as_the_one_vocabulary(
    con: duckdb.DuckDBPyConnection,
) -> None:
    (upcaster,) = [u for u in UPCASTERS if u.type == "comparison_completed"]
    for old, new in LEGACY_COMPARISON_VERDICTS.items():
        payload = {"metric": "output_throughput", "verdict": old}
        assert upcaster.python(payload)["verdict"] == new
        assert sql_upcast(con, upcaster.sql, payload)["verdict"] == new
        assert new in COMPARISON_VERDICTS and new.replace("-", " ") == old
