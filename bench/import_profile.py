"""Where bulk import spends its time, and what faster variants of each step would give.

Reads the first ``--lines`` lines of the benchmark's cached JSONL file (run
``bench_ledger.py --only import`` first) and times, per event:

- parse + validate as ``ledger.jsonl`` does it (``json.loads`` + ``parse_event``)
  against pydantic parsing the JSON itself (``EVENT_ADAPTER.validate_json``);
- the store's row building (``LedgerStore._row``: ``model_dump(mode="json")`` +
  ``json.dumps``) against ``model_dump_json`` (serialisation in pydantic-core);
- the Arrow build (``pa.Table.from_pylist`` of row dicts) against building
  column lists (``pa.Table.from_pydict``);
- the DuckDB insert with and without the table's indexes (see bench_ledger.py).

It also checks that the fast variants give the same events and the same stored
JSON (compared as parsed JSON), and prints a cProfile of one ``store.append``.

    .venv/bin/python bench/import_profile.py --lines 50000
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import time
from datetime import UTC, datetime
from pathlib import Path
import sys
from typing import Any

import pyarrow as pa

from ledger import store as store_mod
from ledger.jsonl import event_from_obj
from ledger.store import LedgerStore
from schemas import EVENT_ADAPTER, CURRENT_VERSIONS, Event, EventEnvelope

ENV = EventEnvelope.ENVELOPE_FIELDS
sys.path.insert(0, str(Path(__file__).resolve().parent))


def fast_parse(line: str) -> Event:
    """Validate one JSON line in pydantic-core (no json.loads / Python dict in between).

    Lines carrying an older ``schema_version`` fall back to the upcasting path.
    """
    if '"schema_version"' in line:
        obj = json.loads(line)
        version = obj.get("schema_version")
        if isinstance(version, int) and version != CURRENT_VERSIONS.get(obj.get("type")):
            return event_from_obj(obj, "line")
    return EVENT_ADAPTER.validate_json(line)


def fast_row(event: Event, clock: Any) -> dict[str, Any]:
    """``LedgerStore._row`` with the JSON written by pydantic-core instead of model_dump + json.dumps."""
    return {
        "seq": None,
        "event_id": str(event.event_id),
        "type": event.type,
        "schema_version": event.schema_version,
        "stream": event.stream or event.default_stream(),
        "stream_version": event.stream_version,
        "recorded_at": event.recorded_at or clock(),
        "actor_kind": event.actor.kind,
        "actor_name": event.actor.name,
        "session_id": event.session_id,
        "causation_id": str(event.causation_id) if event.causation_id else None,
        "correlation_id": str(event.correlation_id) if event.correlation_id else None,
        "source": event.source,
        "host": event.host.model_dump_json() if event.host is not None else None,
        "payload": event.model_dump_json(exclude=ENV),
    }


def insert_variants(table: pa.Table, workdir: Path, n: int) -> None:
    """DuckDB's part: the store's INSERT ... SELECT from Arrow, with and without indexes and JSON checks."""
    import duckdb

    from bench_ledger import _strip_constraints

    ddl = store_mod.EVENTS_DDL
    plain = _strip_constraints(ddl)
    varchar = plain.replace("host           JSON", "host VARCHAR").replace("payload        JSON", "payload VARCHAR")
    cast_json = ("INSERT INTO events SELECT seq, event_id::UUID, type, schema_version, stream, stream_version, recorded_at, "
                 "actor_kind, actor_name, session_id, causation_id::UUID, correlation_id::UUID, source, host::JSON, "
                 "payload::JSON FROM incoming")
    no_cast = cast_json.replace("host::JSON", "host").replace("payload::JSON", "payload")
    for label, table_ddl, sql in (
        ("DuckDB INSERT (store: 3 unique indexes, ::JSON casts) + close", ddl, cast_json),
        ("DuckDB INSERT without PK/UNIQUE indexes + close", plain, cast_json),
        ("DuckDB INSERT without indexes, payload/host VARCHAR (no JSON check) + close", varchar, no_cast),
    ):
        path = workdir / "insert-variant.duckdb"
        for p in (path, Path(str(path) + ".wal")):
            p.unlink(missing_ok=True)
        con = duckdb.connect(str(path))
        con.execute(table_ddl)
        con.register("incoming", table)

        def run() -> None:
            con.execute(sql)
            con.close()

        timed(label, n, run)
        for p in (path, Path(str(path) + ".wal")):
            p.unlink(missing_ok=True)


def timed(label: str, n: int, fn: Any) -> Any:
    t0 = time.perf_counter()
    out = fn()
    dt = time.perf_counter() - t0
    print(f"| {label} | {dt / n * 1e6:.1f} us/ev | {n / dt:,.0f} ev/s |")
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jsonl", default="/tmp/tuneledger-bench/campaign-1000000-g1.jsonl")
    parser.add_argument("--lines", type=int, default=50_000)
    parser.add_argument("--workdir", default="/tmp/tuneledger-bench")
    args = parser.parse_args()
    with open(args.jsonl, encoding="utf-8") as fh:
        lines = [next(fh) for _ in range(args.lines)]
    n = len(lines)
    print(f"{n:,} events from {args.jsonl}\n\n| step | per event | rate |\n|---|---|---|")
    objs = timed("json.loads", n, lambda: [json.loads(line) for line in lines])
    events = timed("parse_event (pydantic validate_python, via event_from_obj)", n,
                   lambda: [event_from_obj(o, "x") for o in objs])
    fast = timed("EVENT_ADAPTER.validate_json(line) (json.loads + validate in one)", n,
                 lambda: [fast_parse(line) for line in lines])
    same = all(a.model_dump() == b.model_dump() for a, b in zip(events, fast))

    store = LedgerStore(Path(args.workdir) / "unused.duckdb")
    clock = lambda: datetime.now(UTC)  # noqa: E731
    rows = timed("LedgerStore._row (model_dump(mode=json) + json.dumps)", n, lambda: [store._row(e) for e in events])
    rows_fast = timed("fast_row (model_dump_json for payload and host)", n, lambda: [fast_row(e, clock) for e in events])
    same_json = all(
        json.loads(a["payload"]) == json.loads(b["payload"])
        and (a["host"] is None) == (b["host"] is None)
        and (a["host"] is None or json.loads(a["host"]) == json.loads(b["host"]))
        for a, b in zip(rows, rows_fast)
    )
    for i, r in enumerate(rows, start=1):
        r["seq"], r["stream_version"] = i, i
    table = timed("pa.Table.from_pylist(rows, schema) (store)", n,
                  lambda: pa.Table.from_pylist(rows, schema=store_mod._ARROW_SCHEMA))
    names = store_mod._ARROW_SCHEMA.names
    timed("pa.Table.from_pydict(columns) (column lists)", n, lambda: pa.Table.from_pydict(
        {k: [r[k] for r in rows] for k in names}, schema=store_mod._ARROW_SCHEMA))
    insert_variants(table, Path(args.workdir), n)
    print(f"\nfast parse gives the same models: {same}; fast_row gives the same JSON (parsed): {same_json}")

    path = Path(args.workdir) / "profile.duckdb"
    for p in (path, Path(str(path) + ".wal")):
        p.unlink(missing_ok=True)
    prof_store = LedgerStore(path)
    prof_store.init()
    prof = cProfile.Profile()
    prof.enable()
    prof_store.append(events)
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(14)
    print(f"\ncProfile of one store.append({n:,} events), by own time:\n")
    print("\n".join(line for line in out.getvalue().splitlines() if line.strip())[:4000])
    for p in (path, Path(str(path) + ".wal")):
        p.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
