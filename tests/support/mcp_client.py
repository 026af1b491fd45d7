"""The MCP server driven by the SDK's own client, in the test process or as a subprocess.

``in_process(ledger)``: ``tuneledger mcp``'s server (``ledger.mcp.command.build_app``, every
tool the command serves, the runners' too) connected to ``mcp.Client`` in memory: the
protocol's requests and results as the SDK builds and checks them (the client validates each
tool result against the tool's output schema), without a process per test.
``over_stdio(ledger)``: ``tuneledger mcp --ledger L`` started as a subprocess, with the SDK's
stdio client: what an agent's MCP client does.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from tests.support import needs  # noqa: E402 (first: the skip decides)

needs.module("mcp", "the MCP SDK is the `mcp` extra: make installs it")

from mcp import Client, StdioServerParameters  # noqa: E402
from mcp_types import Implementation  # noqa: E402

from ledger.mcp.command import build_app  # noqa: E402
from ledger.mcp.server import build_server  # noqa: E402
from schemas import Actor  # noqa: E402

BIN = Path(sys.executable).parent


@asynccontextmanager
async def in_process(
    ledger: Path,
    *,
    session: str | None = None,
    actor: str | None = None,
    mode: str = "auto",
    client_name: str = "mcp",
    allow_run: bool = True,
) -> AsyncIterator[Client]:
    """``actor``: the server's ``--actor`` (every call's actor); None: ``agent:<client_name>``,
    the name the client declares in ``initialize``; ``allow_run``: the tools that start
    processes are served (``tuneledger mcp --allow-run``)."""
    app = build_app(
        ledger,
        Actor.parse(actor or "agent:mcp"),
        session,
        actor_given=actor is not None,
        allow_run=allow_run,
    )
    info = Implementation(name=client_name, version="0")
    try:
        async with Client(
            build_server(app),  # type: ignore[arg-type]
            mode=mode,
            raise_exceptions=True,
            client_info=info,
        ) as client:
            yield client
    finally:
        app.calls.shut_down(wait_s=60)
        for hook in reversed(app.seat.on_exit):
            hook()


@asynccontextmanager
async def over_stdio(
    ledger: Path,
    *args: str,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout_s: float = 2400,  # a plan on a busy 2-core machine: the CLI walkthrough's bound
    transcript: list[dict[str, Any]] | None = None,
) -> AsyncIterator[Client]:
    params = StdioServerParameters(
        command=str(BIN / "tuneledger"),
        args=["mcp", "--ledger", str(ledger), "--allow-run", *args],
        cwd=str(cwd) if cwd else None,
        env=dict(env) if env is not None else None,
    )
    async with Client(params, read_timeout_seconds=timeout_s) as client:
        if transcript is not None:
            _trace(client, transcript)
        yield client


def _trace(client: Client, transcript: list[dict[str, Any]]) -> None:
    """Record every tool call (arguments, result or error) into ``transcript``."""
    call_tool = client.call_tool

    async def traced(
        name: str, arguments: dict[str, Any] | None = None, *args: Any, **kw: Any
    ) -> Any:
        result = await call_tool(name, arguments, *args, **kw)
        transcript.append(
            {
                "tool": name,
                "arguments": arguments,
                "is_error": result.is_error,
                "output": result.structured_content,
            }
        )
        return result

    client.call_tool = traced  # type: ignore[method-assign]


async def call(
    client: Client, tool: str, arguments: dict[str, Any] | None = None, **kw: Any
) -> dict[str, Any]:
    """A successful call's structured output (the test fails, showing the error, otherwise)."""
    result = await client.call_tool(tool, arguments or {}, **kw)
    assert not result.is_error, f"{tool}: {result.content[0].text if result.content else result}"
    assert result.structured_content is not None
    # what clients that read only text get is the same JSON
    assert json.loads(result.content[0].text) == result.structured_content  # type: ignore[union-attr]
    return result.structured_content


async def refused(
    client: Client, tool: str, arguments: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A refused call's structured error (``{"error": {exit_code, meaning, message}, ...}``)."""
    result = await client.call_tool(tool, arguments or {})
    assert result.is_error, f"{tool} was not refused: {result.structured_content}"
    assert result.structured_content is not None
    error = result.structured_content["error"]
    text = result.content[0].text  # type: ignore[union-attr]
    assert text == f"exit {error['exit_code']} ({error['meaning']}): {error['message']}"
    assert "\n" not in text
    return result.structured_content
