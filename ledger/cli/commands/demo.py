"""``tuneledger demo``: build a demo ledger from a recorded campaign and open it (or print a summary)."""

from __future__ import annotations

import sys
from typing import Any

import click

from ledger.cli.context import Context, ledger_option, pass_ctx, plugin, print_table
from ledger.read import demo_tables


@click.command()
@click.option("--no-tui", is_flag=True, help="Print a summary instead of opening the TUI.")
@click.option(
    "--campaign",
    type=click.Choice(["seeds", "h200", "vllm-cpu"]),
    default="seeds",
    show_default=True,
    help="seeds: data/demo_campaign.jsonl; h200: the H200 runs (data/h200_*.jsonl); vllm-cpu: "
    "vLLM's CPU build on 2 cores (data/vllm_cpu_campaign.jsonl).",
)
@ledger_option
@pass_ctx
def demo(ctx: Context, no_tui: bool, campaign: str) -> None:
    """Build the demo ledger from data/demo_campaign.jsonl (the seeds' campaign) at --ledger and open it."""
    from ledger.cli.demo import CAMPAIGNS, build_demo

    store = build_demo(ctx.ledger, campaign=campaign)
    DEMO_SESSION = CAMPAIGNS[campaign][1]
    # Without a terminal (a script, an agent, CI) there is nothing to draw on: print the summary.
    interactive = sys.stdin.isatty() and sys.stdout.isatty()
    opener = None if no_tui or not interactive else plugin("tuneledger.tui_opener")
    if opener is not None:
        opener(store.path, DEMO_SESSION)
        return
    from ledger.cli.demo import all_demo_ids, own_events

    own = own_events(store, all_demo_ids())
    mine = f" ({own} of them your own, kept)" if own else ""
    click.echo(
        f"built demo ledger {ctx.ledger}: {store.head()} events{mine}, session {DEMO_SESSION}\n"
    )
    print_table(
        demo_tables.board(store),
        title="board",
    )
    if campaign == "h200":
        _print_h200(store)
    elif campaign == "vllm-cpu":
        _print_vllm_cpu(store)
    else:
        print_table(demo_tables.sm120_no_ops(store), title="which flags were no-ops on SM120?")
    print_table(
        demo_tables.throughput_deltas(store),
        title="benchmark deltas (output throughput, tok/s)",
    )
    if not no_tui:
        click.echo(
            "(no terminal to draw the TUI on: summary printed; run it in a terminal, or `tuneledger tui`)"
            if not interactive
            else "(the TUI is not installed; showing the summary)"
        )


def _print_h200(store: Any) -> None:
    print_table(
        demo_tables.flag_verdicts_by_arch(store),
        title="flag verdicts on sm90",
    )
    print_table(
        demo_tables.moe_tunes(store, "h200-moe-tune"),
        title="fused-MoE tune: SGLang default vs tuned (µs), latest tune per shape",
    )
    print_table(
        demo_tables.spec_trials(store),
        title="speculative trials",
    )


def _print_vllm_cpu(store: Any) -> None:
    print_table(
        demo_tables.flag_verdicts(store),
        title="flag verdicts (vLLM 0.32.0, CPU)",
    )
    print_table(
        demo_tables.spec_trials(store, accept_source=True),
        title="ngram speculative decoding (accept length: vLLM's own counters)",
    )
