"""The runners' tools for ``tuneledger mcp`` (registered through the ``tuneledger.mcp_tools``
entry point, so the ledger never imports the runners): ``start_server``, ``stop_server``,
``running_servers`` (``servers``), ``run_bench``, ``run_plan``, ``run_spec`` (``measure``),
``run_tune`` (``tune``). Each calls the library functions its ``tuneledger run`` command calls.
"""

from __future__ import annotations

from ledger.mcp.toolbox import Seat, Toolbox


def register(toolbox: Toolbox, seat: Seat) -> None:
    """Add the runners' tools; the servers they start are stopped when the client goes."""
    from runners.mcp_tools.measure import add_measure_tools
    from runners.mcp_tools.servers import ServerPool, add_server_tools
    from runners.mcp_tools.tune import add_tune_tool

    pool = ServerPool(seat)
    seat.on_exit.append(pool.close)
    add_server_tools(toolbox, pool)
    add_measure_tools(toolbox)
    add_tune_tool(toolbox)
