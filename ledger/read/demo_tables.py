"""The tables ``tuneledger demo --no-tui`` prints of the demo ledger it built, as named queries
(Arrow tables with the columns shown): the CLI holds no SQL of its own
(``tests/project/test_sql_walls.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa

    from ledger.store import LedgerStore


def board(store: LedgerStore) -> pa.Table:
    """Every candidate's status, verdict, priority and reason, in the order they changed."""
    return store.query_arrow(
        "SELECT candidate_id, status, verdict, priority, reason FROM board ORDER BY updated_seq"
    )


def throughput_deltas(store: LedgerStore) -> pa.Table:
    """Each configuration's output throughput against the baseline, by concurrency."""
    return store.query_arrow(
        "SELECT config_name, concurrency, metric, baseline_value, value, "
        "round(change_pct, 2) AS change_pct, verdict "
        "FROM benchmark_deltas WHERE metric = 'output_throughput' ORDER BY config_name, concurrency"
    )


def sm120_no_ops(store: LedgerStore) -> pa.Table:
    """The flags whose verdict on SM120 is that they do nothing."""
    return store.query_arrow(
        "SELECT flag, verdict, basis FROM flag_verdicts WHERE arch = 'sm120' AND no_effect "
        "ORDER BY flag"
    )


def flag_verdicts_by_arch(store: LedgerStore) -> pa.Table:
    """Every flag verdict with its architecture, by flag."""
    return store.query_arrow(
        "SELECT flag, arch, verdict, basis, summary FROM flag_verdicts ORDER BY flag"
    )


def flag_verdicts(store: LedgerStore) -> pa.Table:
    """Every flag verdict, by flag and basis."""
    return store.query_arrow(
        "SELECT flag, verdict, basis, summary FROM flag_verdicts ORDER BY flag, basis"
    )


def moe_tunes(store: LedgerStore, session_id: str) -> pa.Table:
    """The latest halving tune per (E, N) shape of ``session_id``: SGLang's default against the
    tuned kernel, by batch size, with the roofline fractions."""
    return store.query_arrow(
        "SELECT E, N, batch_size, default_us, tuned_us, round(speedup, 3) AS speedup, "
        "round(100 * bandwidth_fraction, 1) AS bandwidth_pct, "
        "round(100 * flops_fraction, 2) AS flops_pct "
        "FROM kernel_tune_results WHERE tune_id IN (SELECT tune_id FROM kernel_tunes "
        "WHERE search LIKE '%halving%' AND session_id = ? "
        "QUALIFY row_number() OVER (PARTITION BY E, N ORDER BY seq DESC) = 1) "
        "ORDER BY seq, batch_size",
        [session_id],
    )


def spec_trials(store: LedgerStore, *, accept_source: bool = False) -> pa.Table:
    """Each speculative trial's accept length and changes (with where the accept length came
    from when ``accept_source``)."""
    accept = (
        "round(accept_length, 2) AS accept_length, accept_length_source"
        if accept_source
        else "accept_length"
    )
    return store.query_arrow(
        f"SELECT trial_id, {accept}, round(output_throughput_change_pct, 1) AS throughput_pct, "
        "round(median_tpot_change_pct, 1) AS tpot_pct, verdict FROM spec_trials"
    )
