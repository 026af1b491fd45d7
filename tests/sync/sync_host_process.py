"""One "host" of the sync load test: its own ledger, appending and syncing with a shared hub.

Run as ``python tests/sync/sync_host_process.py LEDGER NAME REMOTE_URL SCHEMA EVENTS SEED``: appends
batches of 50-150 events (notes, flag verdicts on SM120, candidates, and triages and decisions
on a flag and a candidate every host shares) until it has appended ``EVENTS``, running
``sync`` after every batch, and prints ``done <appended> <syncs>``. The password comes from
``PGPASSWORD``. A ``LedgerError`` exits with its code.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

from ledger.errors import LedgerError
from ledger.store import LedgerStore
from ledger.sync import replicate as sync
from ledger.sync.remote import add_remote, parse_remote
from schemas import Host
from schemas.events import (
    CandidateProposed,
    CandidateTriaged,
    DecisionRecorded,
    Event,
    FlagResearched,
    NoteAdded,
)

SM120 = Host(compute_capability="sm120", engine="sglang", engine_version="0.5.6")
VERDICTS = ("effective", "no-op", "not-activated", "dead-code")
STATUSES = ("accepted", "rejected", "deferred", "done")


def _event(rng: random.Random, name: str, n: int) -> Event:
    roll = rng.random()
    if roll < 0.5:
        return NoteAdded(text=f"{name} note {n}")
    if roll < 0.7:
        flag = "shared-flag" if rng.random() < 0.3 else f"{name}-flag-{rng.randrange(5)}"
        return FlagResearched(flag=flag, verdict=rng.choice(VERDICTS), host=SM120)
    if roll < 0.75:
        return CandidateProposed(
            candidate_id=f"flag:{name}-{n}", kind="flag", title=f"try {n}", flag=f"{name}-{n}"
        )
    if roll < 0.8:
        return DecisionRecorded(
            decision=f"{name} keeps shared-flag at {n}", candidate_id="flag:shared-flag"
        )
    return CandidateTriaged(
        candidate_id="flag:shared-flag", status=rng.choice(STATUSES), reason=f"{name} at {n}"
    )


def main() -> int:
    ledger, name, url, schema, total, seed = sys.argv[1:7]
    rng = random.Random(int(seed))
    store = LedgerStore(Path(ledger))
    sync.ensure_tables(store)
    remote = parse_remote("hub", url, schema)
    add_remote(store, remote)
    sync.set_name(store, name)
    if int(seed) == 0:
        store.append(
            CandidateProposed(
                candidate_id="flag:shared-flag",
                kind="flag",
                title="shared",
                flag="shared-flag",
                host=SM120,
            )
        )
    appended = 1 if int(seed) == 0 else 0
    syncs = 0
    try:
        while appended < int(total):
            size = min(rng.randint(50, 150), int(total) - appended)
            store.append([_event(rng, name, appended + i) for i in range(size)])
            appended += size
            sync.sync(store, remote)
            syncs += 1
    except LedgerError as exc:
        print(f"error {exc}", file=sys.stderr)
        return exc.exit_code
    print(f"done {appended} {syncs}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
