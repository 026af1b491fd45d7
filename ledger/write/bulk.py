"""Bulk import of JSON lines: validation in worker processes, one store transaction.

``tuneledger append < FILE`` with many JSON lines comes here. Where an event-by-event
import spends its time (bench/bench_ledger.py; the figures in docs/performance.md): pydantic
validation, most of it the cyclic garbage collector walking the models just made, then the
store. So:

1. lines are validated in chunks (``CHUNK_LINES``) by worker processes (``workers``, default
   one per core, at most ``MAX_WORKERS``; inline below ``PARALLEL_MIN_LINES``), forked with
   the lines in memory (a task names its chunk by position), each with the cyclic GC off
   while it validates and glibc told to keep freed memory (``_keep_memory``). A chunk's
   payloads are dumped as they are, then checked for integers beyond BIGINT and gated for
   secrets all at once (``ledger.store.payloads.stored_payloads``: one pass over the chunk's joined
   text, the rare payload with a hit looked at alone); each chunk comes back as one Arrow
   table of ``events`` columns (``ledger.store.columns_table``: no per-event object to unpickle);
2. the store inserts each chunk as it arrives, in file order, while the workers validate the
   next ones (``LedgerStore.append_column_chunks``): one transaction in which the single
   writer numbers ``seq`` and stream versions in SQL (window functions, each chunk continuing
   from the last), one ``INSERT ... SELECT`` a chunk, and projects the chunk from its own
   rows; DuckDB on one thread, the workers at a lower priority (``WORKER_NICENESS``): that
   thread is the import's critical path. Full row groups are compressed and written as they
   fill (``ledger.store.ROW_GROUP_ROWS``), so the commit has little left to do. The store's
   guarantees hold unchanged (idempotent by ``event_id``, atomic, gapless ``seq``). A chunk
   that may be a retry or a conflict rolls it all back, and the whole batch takes
   ``commands.append_table`` (the careful path, which stores the new events or words the
   error).

Errors name the input and the line (``InvalidInput``), the first bad line of the file, and
nothing is written then: the transaction is rolled back.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager, suppress
from datetime import datetime
from itertools import chain, islice
from typing import TYPE_CHECKING, Any

from ledger.errors import InvalidInput
from ledger.store import COLUMNS, AppendResults, LedgerStore, columns_table, event_values
from ledger.store.gc_pause import no_cyclic_gc
from ledger.store.payloads import stored_payloads
from ledger.write import commands, rules
from ledger.write.jsonl import iter_jsonl
from schemas import Actor

if TYPE_CHECKING:
    import pyarrow as pa

#: Lines per validation task.
CHUNK_LINES = 10_000
#: Lines of the first task: the store starts on the file's first lines this much sooner
#: (10,000 lines kept it waiting ~0.5 s; 2,000 ~0.2 s, the workers' start included).
FIRST_CHUNK_LINES = 2_000
#: How much the validation workers yield to the process that stores what they validated
#: (``os.nice`` increment): on 2 cores the store's one thread, which numbers, inserts and
#: projects each chunk in file order, is the import's critical path; the workers fill the rest.
WORKER_NICENESS = 5
#: Below this many lines, validate in this process (starting workers costs more).
PARALLEL_MIN_LINES = 20_000
#: Upper bound on validation processes.
MAX_WORKERS = 4


def table_of_lines(
    lines: Sequence[str],
    name: str,
    first_line: int,
    now: datetime | None = None,
    actor: Actor | None = None,
    session_id: str | None = None,
) -> pa.Table:
    """Validate JSON lines (numbered from ``first_line`` in messages) into one Arrow table of
    store rows (``ledger.store.columns_table``: what a worker sends back).

    ``actor`` and ``session_id``: defaults for events that do not give them (the CLI's
    ``--actor``/``--session``). ``now``: ``recorded_at`` of events without one (None: the store
    stamps them inside its write transaction, as for every append).

    Raises:
        InvalidInput: ``name:line``: bad JSON or a bad event (``ledger.write.jsonl.iter_jsonl``).
    """
    rows: list[tuple[Any, ...]] = []
    with no_cyclic_gc():
        try:
            for event in iter_jsonl(lines, name, first_line):
                update: dict[str, Any] = {}
                if actor is not None and "actor" not in event.model_fields_set:
                    update["actor"] = actor
                if session_id is not None and event.session_id is None:
                    update["session_id"] = session_id
                if update:
                    event = event.model_copy(update=update)
                rows.append(event_values(event, now, checked=False))
        except InvalidInput:
            # an earlier line's error (an integer beyond BIGINT) comes first
            _check_and_mask(_columns(rows), lines, first_line, name)
            raise
        columns = _columns(rows)
        _check_and_mask(columns, lines, first_line, name)
        return columns_table(columns, len(rows))


def _columns(rows: list[tuple[Any, ...]]) -> dict[str, list[Any]]:
    """``event_values`` tuples as ``events`` columns (one C-speed transpose)."""
    return dict(zip(COLUMNS, map(list, zip(*rows, strict=True)), strict=True)) if rows else {}


def _check_and_mask(
    columns: dict[str, list[Any]], lines: Sequence[str], first_line: int, name: str
) -> None:
    """The payloads and sources checked and masked at once, in place (``stored_payloads``)."""
    if not columns:
        return
    types = columns["type"]

    def label(i: int) -> str:
        # iter_jsonl skips blank lines: row i is the i-th line that is not blank
        numbers = [first_line + n for n, line in enumerate(lines) if line.strip()]
        return f"{name}:{numbers[i]}: {types[i]}"

    stored_payloads(columns["payload"], columns["source"], label)


def import_lines(
    store: LedgerStore,
    lines: Sequence[str],
    name: str,
    *,
    actor: Actor | None = None,
    session_id: str | None = None,
    workers: int | None = None,
) -> tuple[AppendResults, list[str]]:
    """Validate every line and append them all as one atomic batch, the store inserting each
    validated chunk while the workers validate the next ones.

    Returns the append results (a sequence of ``AppendResult``) and the event type of
    each, in input order.

    ``workers``: validation processes (None: one per core up to ``MAX_WORKERS``; 1: inline).

    Raises:
        InvalidInput: a bad line (nothing is written; the first bad line of the file).
        LedgerBusy, EventIdReused, ConcurrencyConflict, NotFound: as ``LedgerStore.append``.
    """

    if not lines:
        return AppendResults([], [], [], []), []
    if workers is None:
        workers = min(os.cpu_count() or 1, MAX_WORKERS)
    parallel = workers > 1 and len(lines) >= PARALLEL_MIN_LINES
    with no_cyclic_gc(), _validated(lines, name, actor, session_id, workers) as parts:
        # DuckDB gets the cores the validation workers leave (at least one)
        threads = max(1, (os.cpu_count() or 1) - workers) if parallel else None
        return append_chunks(store, parts, where=name, total=len(lines), threads=threads)


def append_chunks(
    store: LedgerStore,
    chunks: Iterable[pa.Table],
    *,
    where: str = "input",
    total: int,
    threads: int | None = None,
) -> tuple[AppendResults, list[str]]:
    """Append a batch of store rows that arrives in parts (tables of ``columns_table``'s
    columns, in batch order) atomically: the chunked path. Each part gets the triage rule as
    it comes (``rules.refuse_untriaged``) and the retraction rules inside the store's
    transaction (``rules.part_is_clear``), and is inserted at once
    (``LedgerStore.append_column_chunks``); a part in doubt (a retraction to look up across
    the batch, a retry, a conflict) sends the whole batch to the column path
    (``commands.append_table``: ``rules.check_table``, then the careful store path).
    ``total``: the batch's events (for the messages' event numbers).

    Returns the append results and the event type of each, in batch order.

    Raises:
        InvalidInput, NotFound: a rule refused the batch (nothing written).
        LedgerBusy, EventIdReused, ConcurrencyConflict: as ``LedgerStore.append``; whatever
        ``chunks`` raises (a bad line), after the rollback.
    """
    import pyarrow as pa

    tables: list[pa.Table] = []

    def taken() -> Iterator[pa.Table]:
        for table in chunks:
            before = sum(t.num_rows for t in tables)
            rules.refuse_untriaged(table, where=where, before=before, total=total)
            tables.append(table)
            yield table

    # The file is taken once the first part is ready (a bad first chunk never touches it,
    # and a reader waiting for the file does not wait on its validation).
    ready = taken()
    first = list(islice(ready, 1))
    results = store.append_column_chunks(
        chain(first, ready), check=rules.part_is_clear, threads=threads
    )
    if results is None:  # a retry, a conflict or a retraction to look up: rows as a whole
        for _ in ready:  # the parts not yet taken, in order, into ``tables``
            pass
        whole = pa.concat_tables(tables) if tables else None
        results = (
            commands.append_table(store, whole, where=where)
            if whole is not None
            else AppendResults([], [], [], [])
        )
    types = [t for table in tables for t in table.column("type").to_pylist()]
    return results, types


@contextmanager
def _validated(
    lines: Sequence[str],
    name: str,
    actor: Actor | None,
    session_id: str | None,
    workers: int,
) -> Iterator[Iterator[pa.Table]]:
    """The lines' validated chunks (``table_of_lines``), in file order, as they are ready:
    by ``workers`` processes (all chunks submitted at once), inline for one worker or a
    short input. A worker's error is raised when its chunk's turn comes (earlier chunks
    first: the first bad line of the file wins); leaving cancels what is not yet started."""
    now = None  # recorded_at of events without one: stamped by the store in its transaction
    chunks = [(lines[start:end], start + 1) for start, end in _chunk_bounds(len(lines))]
    if workers <= 1 or len(lines) < PARALLEL_MIN_LINES:
        yield (
            table_of_lines(chunk, name, first, now, actor, session_id) for chunk, first in chunks
        )
        return
    import multiprocessing

    global _LINES
    context = multiprocessing.get_context("fork")
    # The workers are forked with the lines in memory: a task names its chunk by position
    # (pickling a chunk's lines to a worker cost both sides more: docs/performance.md).
    _LINES = lines
    pool = ProcessPoolExecutor(
        max_workers=min(workers, len(chunks)),
        mp_context=context,
        initializer=_worker_setup,
        initargs=(os.getpid(),),
    )
    try:
        # The workers are forked at the first submit: a SIGINT during a fork raised
        # KeyboardInterrupt inside an at-fork hook (logging's), where Python prints it and goes
        # on, and the interrupted import then committed. Held until the forks are done, it is
        # raised here instead.
        held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            futures = [
                pool.submit(_table_of_chunk, first, len(chunk), name, now, actor, session_id)
                for chunk, first in chunks
            ]
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)

        def results() -> Iterator[pa.Table]:
            for future in futures:
                yield future.result()
            pool.shutdown(wait=False)  # the workers exit while the store commits

        yield results()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        _LINES = ()


def _chunk_bounds(total: int) -> list[tuple[int, int]]:
    """(start, end) of each validation task over ``total`` lines: ``FIRST_CHUNK_LINES``,
    then ``CHUNK_LINES`` each."""
    if not total:
        return []
    starts = [0, *range(min(FIRST_CHUNK_LINES, total), total, CHUNK_LINES)]
    return list(zip(starts, [*starts[1:], total], strict=True))


def _worker_setup(parent: int) -> None:
    """A validation worker's start: it dies with its parent (``parent``: the pid of the
    process that forked it), keeps its freed memory, and yields the CPU to the storing
    process (``WORKER_NICENESS``)."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # held while it was forked
    _die_with_parent(parent)
    _keep_memory()
    with suppress(OSError):
        os.nice(WORKER_NICENESS)


def _die_with_parent(parent: int) -> None:
    """Ask Linux to SIGKILL this worker when the process that forked it (``parent``) dies
    (``prctl``'s ``PR_SET_PDEATHSIG``; elsewhere nothing). A parent killed with SIGKILL
    mid-import left its workers blocked on a full pipe for good, each holding the other's pipe,
    and, in the resident process, the client's socket: the client then never saw its server end.
    ``parent`` is the pid the parent gave before forking, not ``os.getppid()`` read here: a
    parent killed between the fork and this call has already been replaced by init (or a
    subreaper), which the request would then watch instead, and the worker lived on for good
    (a loaded machine, docs/performance.md *The test suite*)."""
    import ctypes
    import ctypes.util
    import signal

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before the request was made
        os._exit(1)


def _keep_memory() -> None:
    """A worker keeps the memory it freed for its next chunk (glibc's ``mallopt``; elsewhere
    nothing): by default glibc hands large blocks back to the kernel at once and takes them
    again for the next chunk, a page fault every 4 KB (what that cost: docs/performance.md)."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return
    m_trim_threshold, m_top_pad, m_mmap_threshold = -1, -2, -3
    mallopt(m_trim_threshold, 1 << 30)
    mallopt(m_top_pad, 64 << 20)
    mallopt(m_mmap_threshold, 1 << 30)


#: The lines of the import in progress, for the forked workers (``_table_of_chunk``).
_LINES: Sequence[str] = ()


def _table_of_chunk(
    first: int,
    count: int,
    name: str,
    now: datetime | None,
    actor: Actor | None,
    session_id: str | None,
) -> pa.Table:
    """``table_of_lines`` of the ``count`` lines from line ``first`` of ``_LINES`` (in a
    forked worker)."""
    chunk = _LINES[first - 1 : first - 1 + count]
    return table_of_lines(chunk, name, first, now, actor, session_id)
