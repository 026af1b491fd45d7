"""One store's append series, run in its own process by bench/bench_store.py.

Usage: ``python bench/store_peers.py SYSTEM WORKDIR [--singles N] [--batches B] [--batch-size S]``
with SYSTEM one of ``tuneledger`` (run with the project's venv), ``mlflow`` or ``optuna``
(run with bench/.venv-peers, where ``make bench`` installs them: they are never project
dependencies). Prints one JSON object on stdout:

``single_ms``  the latency of each of N one-record calls, in ms (tuneledger: ``append`` of one
               ``note_added`` on a kept-open store; MLflow: ``MlflowClient.log_metric`` on a
               sqlite tracking store; Optuna: ``study.add_trial`` on a ``JournalStorage`` file)
``single_total_s``, ``single_cpu_s``  wall and CPU time of the whole series, including
               tuneledger's final catch-up and close (the sustained rate is N / total)
``batch_s``    seconds per call of S records (tuneledger: one ``append`` of S events, notes;
               MLflow: ``log_batch`` of S metrics; Optuna: ``add_trials`` of S trials), and
``batch_total_s``, ``batch_cpu_s`` as above.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _series(
    calls: list[Callable[[], Any]], finish: Callable[[], Any] | None = None
) -> tuple[list[float], float, float]:
    latencies = []
    wall0, cpu0 = time.perf_counter(), time.process_time()
    for call in calls:
        start = time.perf_counter()
        call()
        latencies.append(time.perf_counter() - start)
    if finish is not None:
        finish()
    return latencies, time.perf_counter() - wall0, time.process_time() - cpu0


def tuneledger(workdir: Path, singles: int, batches: int, size: int) -> dict[str, Any]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from ledger.store import LedgerStore
    from schemas.events import NoteAdded

    store = LedgerStore(workdir / "tl.duckdb", hold_s=5.0)
    store.init()
    # the record is built inside the call, as MLflow's log_metric and Optuna's create_trial do
    single, single_total, single_cpu = _series(
        [
            lambda i=i: store.append(NoteAdded(text=f"single {i}", session_id="bench"))
            for i in range(singles)
        ],
        store.close,
    )
    groups = [
        [NoteAdded(text=f"batch {b} {i}", session_id="bench") for i in range(size)]
        for b in range(batches)
    ]
    # Set-up outside the timing, as for the singles (opened by init) and the peers (their client
    # and its imports made before their series): the file opened again, pyarrow imported (a
    # batch goes to DuckDB through Arrow; the import is ~100 ms of CPU once per process).
    import pyarrow  # noqa: F401

    store.init()
    batch, batch_total, batch_cpu = _series(
        [lambda g=g: store.append(g) for g in groups], store.close
    )
    return _result(single, single_total, single_cpu, batch, batch_total, batch_cpu)


def mlflow(workdir: Path, singles: int, batches: int, size: int) -> dict[str, Any]:
    import logging

    logging.getLogger("alembic").setLevel(logging.WARNING)
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{workdir / 'mlflow.db'}")
    experiment = client.create_experiment("bench", artifact_location=str(workdir / "mlruns"))
    run_id = client.create_run(experiment).info.run_id
    now = int(time.time() * 1000)
    single, single_total, single_cpu = _series(
        [
            lambda i=i: client.log_metric(
                run_id, "output_throughput", 100.0 + i, timestamp=now, step=i
            )
            for i in range(singles)
        ]
    )
    calls = []
    for b in range(batches):
        metrics = [Metric("tpot_ms", 10.0 + i, now, b * size + i) for i in range(size)]
        calls.append(lambda m=metrics: client.log_batch(run_id, metrics=m))
    batch, batch_total, batch_cpu = _series(calls)
    return _result(single, single_total, single_cpu, batch, batch_total, batch_cpu)


def optuna(workdir: Path, singles: int, batches: int, size: int) -> dict[str, Any]:
    import optuna as op
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    op.logging.set_verbosity(op.logging.WARNING)
    storage = JournalStorage(JournalFileBackend(str(workdir / "optuna.log")))
    study = op.create_study(storage=storage, study_name="bench")
    dist = {"x": op.distributions.FloatDistribution(0, 1)}

    def trial(i: int) -> Any:
        return op.trial.create_trial(
            params={"x": (i % 997) / 997}, distributions=dist, value=float(i)
        )

    single, single_total, single_cpu = _series(
        [lambda i=i: study.add_trial(trial(i)) for i in range(singles)]
    )
    groups = [[trial(b * size + i) for i in range(size)] for b in range(batches)]
    batch, batch_total, batch_cpu = _series([lambda g=g: study.add_trials(g) for g in groups])
    return _result(single, single_total, single_cpu, batch, batch_total, batch_cpu)


def _result(
    single: list[float],
    single_total: float,
    single_cpu: float,
    batch: list[float],
    batch_total: float,
    batch_cpu: float,
) -> dict[str, Any]:
    return {
        "single_ms": [round(s * 1e3, 4) for s in single],
        "single_total_s": single_total,
        "single_cpu_s": single_cpu,
        "batch_s": batch,
        "batch_total_s": batch_total,
        "batch_cpu_s": batch_cpu,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("system", choices=["tuneledger", "mlflow", "optuna"])
    parser.add_argument("workdir", type=Path)
    parser.add_argument("--singles", type=int, default=300)
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=1000)
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    run = {"tuneledger": tuneledger, "mlflow": mlflow, "optuna": optuna}[args.system]
    print(json.dumps(run(args.workdir, args.singles, args.batches, args.batch_size)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
