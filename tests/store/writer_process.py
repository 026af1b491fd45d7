"""A separate process that writes to, reads or locks a ledger file, for the store's contract tests.

Run as ``python tests/store/writer_process.py MODE PATH [options]``:

``append``  append ``--count`` batches of ``--batch`` notes (``--count 0``: forever, until killed),
            one ``append`` call per batch; after each call prints
            ``ack <n> <marker> <seq,seq,...>``. Each note's text is
            ``writer=<name> n=<n> batch=<marker> part=<j>/<batch>``; batch ``n`` goes to
            ``--shared-stream`` when given and ``n`` is even, else to stream ``writer:<name>``.
``race``    append one note to ``--stream`` with ``expected_version=--expected``; prints
            ``won <seq>`` (exit 0) or ``conflict <message>`` (exit 4).
``read``    every ``--interval`` s, read the events after the last seen ``seq`` and count a view,
            until ``--until`` events were seen; exits 1 if it ever sees a gap or a view whose
            count is not its highest ``seq``. Prints ``read refreshes=<n> last=<seq>``.
``hold``    hold the file open read-write (plain ``duckdb.connect``), print ``holding`` and keep
            it until standard input closes.

Every mode's store keeps the file open (``LedgerStore(hold_s=...)``) when the environment
variable ``TUNELEDGER_TEST_HOLD_S`` is set (the contract suite's kept-open configuration).

``--go FILE`` makes a mode print ``ready`` and wait until FILE exists before it starts, so that
processes started one after another begin their work together. A ``LedgerError`` ends the process with its
``exit_code`` and its message on standard error.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from uuid import uuid4

from ledger.errors import ConcurrencyConflict, LedgerError
from ledger.store import LedgerStore
from schemas.events import NoteAdded


def _store(args: argparse.Namespace) -> LedgerStore:
    hold_s = float(os.environ.get("TUNELEDGER_TEST_HOLD_S") or 0)
    return LedgerStore(args.path, lock_timeout_s=args.lock_timeout, hold_s=hold_s)


def _wait_for(go: str | None, timeout_s: float = 60.0) -> None:
    if go is None:
        return
    print("ready", flush=True)
    deadline = time.monotonic() + timeout_s
    while not Path(go).exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"gave up waiting for {go}")
        time.sleep(0.002)


def _append(args: argparse.Namespace) -> int:
    store = _store(args)
    _wait_for(args.go)
    n = 0
    while args.count == 0 or n < args.count:
        marker = uuid4().hex
        stream = (
            args.shared_stream if args.shared_stream and n % 2 == 0 else f"writer:{args.writer}"
        )
        batch = [
            NoteAdded(
                text=f"writer={args.writer} n={n} batch={marker} part={j}/{args.batch}",
                stream=stream,
                candidate_id=f"writer:{args.writer}",
            )
            for j in range(args.batch)
        ]
        results = store.append(batch)
        print(f"ack {n} {marker} {','.join(str(r.seq) for r in results)}", flush=True)
        n += 1
    return 0


def _race(args: argparse.Namespace) -> int:
    store = _store(args)
    event = NoteAdded(text=f"race writer={args.writer}", stream=args.stream)
    _wait_for(args.go)
    try:
        (result,) = store.append([event], expected_version=args.expected)
    except ConcurrencyConflict as exc:
        print(f"conflict {exc}", flush=True)
        return ConcurrencyConflict.exit_code
    print(f"won {result.seq} {result.stream_version}", flush=True)
    return 0


def _read(args: argparse.Namespace) -> int:
    store = _store(args)
    _wait_for(args.go)
    last, refreshes = 0, 0
    deadline = time.monotonic() + args.deadline
    while last < args.until:
        if time.monotonic() > deadline:
            print(f"reader timed out at seq {last}", file=sys.stderr)
            return 2
        events = store.read(after_seq=last)
        seqs = [e.seq for e in events]
        if seqs != list(range(last + 1, last + 1 + len(seqs))):
            print(f"reader saw a gap after seq {last}: {seqs[:10]}...", file=sys.stderr)
            return 1
        last += len(seqs)
        counted = store.query_arrow(
            "SELECT count(*) AS n, coalesce(max(seq), 0) AS head FROM timeline"
        )
        n, head = counted["n"][0].as_py(), counted["head"][0].as_py()
        if n != head or head < last:
            print(f"timeline holds {n} rows up to seq {head} (reader at {last})", file=sys.stderr)
            return 1
        refreshes += 1
        time.sleep(args.interval)
    print(f"read refreshes={refreshes} last={last}", flush=True)
    return 0


def _hold(args: argparse.Namespace) -> int:
    import duckdb

    con = duckdb.connect(args.path)
    print("holding", flush=True)
    sys.stdin.read()
    con.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["append", "race", "read", "hold"])
    parser.add_argument("path")
    parser.add_argument("--writer", default="w")
    parser.add_argument("--count", type=int, default=1)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--shared-stream")
    parser.add_argument("--stream", default="race")
    parser.add_argument("--expected", type=int, default=0)
    parser.add_argument("--until", type=int, default=0)
    parser.add_argument("--interval", type=float, default=0.1)
    parser.add_argument("--deadline", type=float, default=120.0)
    parser.add_argument("--lock-timeout", type=float, default=30.0)
    parser.add_argument("--go")
    args = parser.parse_args(argv)
    mode = {"append": _append, "race": _race, "read": _read, "hold": _hold}[args.mode]
    try:
        return mode(args)
    except LedgerError as exc:
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return exc.exit_code


if __name__ == "__main__":
    sys.exit(main())
