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

import uuid
from collections.abc import Callable
from datetime import datetime
from importlib.resources import as_file, files
from pathlib import Path

from ledger.errors import EventIdReused, WouldLoseData
from ledger.store import LedgerStore
from ledger.write import commands
from ledger.write.jsonl import read_jsonl

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
            appended to, which stores nothing twice (fixed ids). Nothing is ever
            deleted: an existing ledger holding any other event is refused.
        clock: stamps ``recorded_at`` on each event (all demo events lack it);
            the store's default clock (now, UTC) when ``None``.
        campaign: a key of ``CAMPAIGNS`` (``seeds``: ``DEMO_FILE``; ``h200``).

    All events are validated before anything is written, then appended in one
    atomic batch.

    Raises:
        WouldLoseData: (exit 2) the file is a ledger with events of its own.
        InvalidInput: a line of the demo file does not validate, or the path is
            not a ledger file.
        NotFound: the demo file is missing.
        LedgerBusy: another process holds the ledger file.
    """
    path = Path(ledger_path)
    events = [e for name in CAMPAIGNS[campaign][0] for e in read_jsonl(campaign_file(name))]
    store = LedgerStore(path, clock=clock)
    store.check_path()
    if path.exists():
        own = _non_demo_events(store, {str(e.event_id) for e in events})
        if own:  # maybe another campaign's demo events: those are the demo's too
            others = {
                str(e.event_id)
                for name, (files, _) in CAMPAIGNS.items()
                if name != campaign
                for file in files
                for e in read_jsonl(campaign_file(file))
            }
            own = _non_demo_events(store, {str(e.event_id) for e in events} | others)
        if own:
            raise WouldLoseData(
                f"{path} already holds a ledger with {own} event(s) that are not the demo's; "
                "nothing was changed. Build the demo elsewhere: "
                "`tuneledger demo --ledger demo.duckdb` (or `make demo LEDGER=demo.duckdb`)"
            )
    store.init()
    try:
        commands.restore(store, events)
    except EventIdReused:
        raise WouldLoseData(
            f"{path} holds a demo ledger built from an older demo file; nothing was changed (no command "
            "rewrites a ledger). Build the current demo elsewhere: `tuneledger demo --ledger demo-new.duckdb`"
        ) from None
    return store


def _non_demo_events(store: LedgerStore, demo_ids: set[str]) -> int:
    """How many events of the ledger at ``store`` are not among ``demo_ids`` (0 for an empty file)."""
    if store.path.stat().st_size == 0:
        return 0
    table = store.query_arrow("SELECT event_id::VARCHAR AS event_id FROM events")
    return sum(1 for event_id in table.column("event_id").to_pylist() if event_id not in demo_ids)
