"""The runners' reads of the ledger (a plan's proposals, what a resumed plan already ran, the
time its remaining points will take), as named queries with typed rows: the runners hold no
SQL of their own (``tests/project/test_sql_walls.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ledger.store import LedgerStore


@dataclass(frozen=True)
class BoardCandidates:
    """The candidates on the board, and each candidate stream's version (retracted events
    count: they are still in the stream), what a proposal expects its stream at."""

    on_board: frozenset[str]
    versions: dict[str, int]


def board_candidates(store: LedgerStore) -> BoardCandidates:
    """The board's candidates and the candidate streams' versions, read at once."""
    rows = store.query_arrow(
        "SELECT candidate_id, NULL AS stream, NULL AS version FROM board UNION ALL "
        "SELECT NULL, stream, max(stream_version) FROM events "
        "WHERE starts_with(stream, 'candidate:') GROUP BY stream"
    ).to_pylist()
    return BoardCandidates(
        frozenset(r["candidate_id"] for r in rows if r["candidate_id"] is not None),
        {r["stream"]: r["version"] for r in rows if r["stream"] is not None},
    )


@dataclass(frozen=True)
class Workload:
    """The benchmarks of one plan's workload: its session, the tool, the lengths and the rate."""

    session_id: str | None
    tool: str
    input_len: int
    output_len: int
    request_rate: float | None

    def where(self) -> tuple[str, list[Any]]:
        sql = (
            "session_id IS NOT DISTINCT FROM ? AND tool = ? AND input_len = ? AND output_len = ? "
            "AND request_rate IS NOT DISTINCT FROM ?"
        )
        return sql, [self.session_id, self.tool, self.input_len, self.output_len, self.request_rate]


def valid_benchmark_ids(
    store: LedgerStore, workload: Workload, configs: Sequence[str]
) -> list[Any]:
    """The event ids (as ``LedgerStore.get`` takes them) of the valid benchmarks of
    ``workload`` by ``configs``, in log order."""
    where, params = workload.where()
    ids = store.query_arrow(
        f"SELECT event_id FROM benchmarks WHERE {where} AND valid AND config_name IN "
        f"({', '.join('?' for _ in configs)}) ORDER BY seq",
        [*params, *configs],
    ).column("event_id")
    found: list[Any] = ids.to_pylist()
    return found


@dataclass(frozen=True)
class ServerStart:
    """A server run's configuration, engine and seconds to ready (None: never ready)."""

    config_name: str | None
    engine: str | None
    ready_after_s: float | None


def server_starts(store: LedgerStore) -> list[ServerStart]:
    """Every server run's time to ready, in the view's order."""
    rows = store.query_arrow("SELECT config_name, engine, ready_after_s FROM server_runs")
    return [ServerStart(**row) for row in rows.to_pylist()]


@dataclass(frozen=True)
class BenchmarkDuration:
    """A benchmark's configuration, concurrency and duration in seconds."""

    config_name: str | None
    concurrency: int | None
    duration_s: float | None


def benchmark_durations(store: LedgerStore, workload: Workload) -> list[BenchmarkDuration]:
    """Every benchmark of ``workload``: how long it took, by configuration and concurrency."""
    where, params = workload.where()
    rows = store.query_arrow(
        f"SELECT config_name, concurrency, duration_s FROM benchmarks WHERE {where}", params
    )
    return [BenchmarkDuration(**row) for row in rows.to_pylist()]


@dataclass(frozen=True)
class OpenServerRun:
    """A server run still ``starting`` or ``ready`` on a port: who started it where (the
    ``server_started`` event's pid and the recording host's name, lower case)."""

    run_id: str
    config_name: str | None
    session_id: str | None
    started_at: str
    pid: int | None
    hostname: str | None


def open_server_runs(store: LedgerStore, port: int) -> list[OpenServerRun]:
    """The server runs not yet stopped or failed that started on ``port``, latest first."""
    rows = store.query_arrow(
        """
        SELECT r.run_id, r.config_name, r.session_id, r.started_at::VARCHAR AS started_at,
               (s.payload->>'pid')::BIGINT AS pid, lower(s.hostname) AS hostname
        FROM server_runs r
        JOIN (SELECT payload, payload->>'run_id' AS run_id,
                     host->>'hostname' AS hostname
              FROM live_control WHERE type = 'server_started') s USING (run_id)
        WHERE r.status IN ('starting', 'ready') AND (s.payload->>'port')::BIGINT = ?
        ORDER BY r.started_seq DESC
        """,
        [port],
    )
    return [OpenServerRun(**row) for row in rows.to_pylist()]
