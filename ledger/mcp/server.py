"""The MCP server: the toolbox, the resources and the prompt over the SDK's low-level ``Server``.

Why the low-level ``Server`` and not ``MCPServer`` (v1's ``FastMCP``): ``MCPServer`` derives a
tool's input schema from a Python signature, and the ``record_<type>`` tools must publish the
event type's own JSON Schema unchanged. With the low-level server every tool is listed from
the ``Toolbox`` as it is (input schema, output schema, annotations) and called through one
dispatcher: arguments to the handler in a worker thread, its dict back as structured content
(and as JSON text, for clients that read only text), a refusal as a tool error
(``ledger.mcp.errors``).

Progress: a handler's ``call.progress(message, done, total)`` becomes a
``notifications/progress`` when the client gave a progress token. Its ``progress`` value grows
with every notification, as the protocol requires: ``done`` (runs completed, say) plus a
fraction that grows with each message sent since ``done`` last changed.

Cancellation: a cancelled call returns at once; its worker thread is told
(``Call.cancelled``) and stops at its next safe point as on Ctrl-C (a runner stops the server it
started and records what completed). When the client goes, every call still running is
cancelled and waited for (``Calls.shut_down``), then the ``Seat.on_exit`` hooks run.

The ledger is never held between calls: every tool opens it one-shot (``Seat.store``), and a
long-running tool that keeps it open for its appends closes it before it returns.
"""

from __future__ import annotations

import json
import logging
import signal
import sys
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread
import mcp_types as types
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.shared._context_streams import create_context_streams
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from ledger.errors import LedgerBusy, LedgerError
from ledger.mcp.errors import Refusal, error_payload, unknown_tool
from ledger.mcp.resources import Library
from ledger.mcp.toolbox import Call, LazyToolbox, Seat, Tool, Toolbox
from ledger.mcp.wire import MAX_MESSAGE_BYTES, OVER_LONG, BoundedLines, claimed_stdin
from schemas import Actor

log = logging.getLogger("tuneledger.mcp")

#: How long the server waits, once the client has gone, for cancelled calls to unwind (a plan
#: stopping its server: SIGINT, then SIGTERM after the configuration's wait), in seconds.
SHUTDOWN_WAIT_S = 120.0


class Calls:
    """The calls running in worker threads, so that a server going away can cancel and wait."""

    def __init__(self) -> None:
        self._running: set[Call] = set()
        self._idle = threading.Condition()

    def start(self, call: Call) -> None:
        with self._idle:
            self._running.add(call)

    def end(self, call: Call) -> None:
        with self._idle:
            self._running.discard(call)
            self._idle.notify_all()

    def shut_down(self, wait_s: float = SHUTDOWN_WAIT_S) -> bool:
        """Cancel every running call and wait up to ``wait_s`` for them to end; whether all did."""
        with self._idle:
            for call in self._running:
                call.cancelled.set()
            return self._idle.wait_for(lambda: not self._running, timeout=wait_s)


class _Progress:
    """A call's progress reporter: from its worker thread to the client, increasing values."""

    def __init__(
        self, send: Callable[[float, float | None, str], Coroutine[Any, Any, None]]
    ) -> None:
        self._send = send
        self._done = 0.0
        self._since = 0

    def __call__(self, message: str, done: float | None, total: float | None) -> None:
        if done is not None and done > self._done:
            self._done, self._since = done, 0
        self._since += 1
        value = self._done + 1 - 0.5**self._since  # below done + 1: the next ``done`` is larger
        try:
            anyio.from_thread.run(self._send, value, total, message)
        except Exception:  # the client went away mid-call: the work goes on, unreported
            log.debug("progress not delivered: %s", message)


#: The longest client name kept in an actor (``agent:<name>``).
MAX_CLIENT_NAME = 64
#: How many times a call that met a storage error it did not expect (another connection's file
#: handle, a lock the store did not see) is run again, and the first pause between, seconds.
RETRIES, RETRY_PAUSE_S = 4, 0.05


def client_actor(ctx: ServerRequestContext[Any, Any], seat: Seat) -> Actor:
    """Who a call writes as: the seat's ``--actor`` when the operator gave one, else
    ``agent:<the client's declared name>`` (``initialize``'s ``clientInfo.name``), else the
    seat's default. Never the call's arguments."""
    if seat.actor_given:
        return seat.actor
    params = ctx.session.client_params
    name = params.client_info.name if params is not None and params.client_info else ""
    name = "-".join(name.split())[:MAX_CLIENT_NAME]
    if not name or not name.isprintable():
        return seat.actor
    try:
        return Actor.parse(f"agent:{name}")
    except ValueError:
        return seat.actor


@dataclass
class McpApp:
    """The seat, the tools, the resources and the running calls of one server.

    ``writes``: the one-writer queue. DuckDB lets one process write a file at a time; the calls
    that append (every tool that is not read-only, bar the long-running ones, which keep the
    store open through its own hold and hand-off) take it in turn, in arrival order, while reads
    run beside them on connections of their own.
    """

    seat: Seat
    toolbox: Toolbox
    library: Library
    calls: Calls
    writes: threading.Lock = field(default_factory=threading.Lock)

    def tool_list(self) -> list[types.Tool]:
        return [mcp_tool(tool) for tool in self.toolbox]

    async def call(
        self, ctx: ServerRequestContext[Any, Any], name: str, arguments: dict[str, Any]
    ) -> types.CallToolResult:
        tool = self.toolbox.get(name)
        if tool is None:
            return error_result(unknown_tool(name))
        session = ctx.session

        async def send(value: float, total: float | None, message: str) -> None:
            await session.report_progress(value, total, message)

        call = Call(self.seat, report=_Progress(send), actor=client_actor(ctx, self.seat))
        self.calls.start(call)
        queued = not tool.read_only and not tool.long_running

        def work() -> dict[str, Any]:
            try:
                if queued:
                    with self.writes:
                        return _retried(tool, arguments, call)
                return _retried(tool, arguments, call)
            finally:
                self.calls.end(call)

        try:
            output = await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
        except anyio.get_cancelled_exc_class():
            call.cancelled.set()  # the worker stops at its next safe point (module doc)
            raise
        except (Exception, KeyboardInterrupt) as exc:  # a refusal, or Call.check_cancelled
            return error_result(exc)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=json.dumps(output))],
            structured_content=output,
        )


def _retried(tool: Tool, arguments: dict[str, Any], call: Call) -> dict[str, Any]:
    """``tool``'s handler, run again (a few times, with jittered backoff) when DuckDB raised an
    error the store did not turn into one of its own (another connection of this process on the
    file, a lock); still failing: exit 7 with a retry hint. A long-running tool is never re-run
    (it may have started a server)."""
    import duckdb
    from tenacity import (
        RetryError,
        Retrying,
        retry_if_exception_type,
        stop_after_attempt,
        wait_random_exponential,
    )

    retrying = Retrying(
        retry=retry_if_exception_type(duckdb.Error),
        wait=wait_random_exponential(multiplier=RETRY_PAUSE_S, max=1.0),
        stop=stop_after_attempt(1 if tool.long_running else RETRIES + 1),
    )
    try:
        return retrying(tool.handler, arguments, call)
    except RetryError as exc:
        error = exc.last_attempt.exception()
        first = str(error).splitlines()[0] if str(error) else ""
        raise LedgerBusy(
            f"{tool.name}: the ledger was busy ({type(error).__name__}: {first}); retry the call"
            + ("" if tool.read_only else " (give event_id to make the retry idempotent)")
        ) from None


def mcp_tool(tool: Tool) -> types.Tool:
    """A ``Tool`` as the protocol lists it."""
    return types.Tool(
        name=tool.name,
        title=tool.title,
        description=tool.description,
        input_schema=tool.input_schema,
        output_schema=tool.output_schema,
        annotations=types.ToolAnnotations(
            read_only_hint=tool.read_only,
            destructive_hint=tool.destructive,
            idempotent_hint=tool.idempotent,
            open_world_hint=tool.long_running,
        ),
    )


def error_result(exc: Exception | KeyboardInterrupt) -> types.CallToolResult:
    """The tool error for ``exc`` (``ledger.mcp.errors.error_payload``); an unexpected exception's
    traceback goes to the server's standard error, its type and message to the client."""
    if not isinstance(exc, LedgerError | Refusal | KeyboardInterrupt):
        log.error("tool failed unexpectedly", exc_info=exc)
    text, structured = error_payload(exc)
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        structured_content=structured,
        is_error=True,
    )


def build_server(app: McpApp) -> Server[Any]:
    """The SDK server answering tools, resources and prompts from ``app``."""
    from importlib.metadata import version

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=app.tool_list())

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        return await app.call(ctx, params.name, dict(params.arguments or {}))

    async def list_resources(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        resources = await anyio.to_thread.run_sync(app.library.resources, app.seat)
        return types.ListResourcesResult(resources=resources)

    async def list_templates(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=app.library.templates())

    async def read_resource(
        ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        return await anyio.to_thread.run_sync(app.library.read, app.seat, uri)

    async def list_prompts(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=app.library.prompts())

    async def get_prompt(
        ctx: ServerRequestContext[Any, Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        arguments = dict(params.arguments or {})
        return await anyio.to_thread.run_sync(app.library.prompt, app.seat, params.name, arguments)

    return Server(
        "tuneledger",
        version=version("tuneledger"),
        title="tuneledger",
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
    )


INSTRUCTIONS = (
    "tuneledger: the event-sourced ledger of an inference-server tuning session. Record what you "
    "learn with record_<event_type> (one tool per event type) or the verbs propose_candidate, "
    "triage_candidate, record_decision; run servers, benchmarks and plans with start_server, "
    "run_bench, run_plan (they record everything themselves); read the board, flag_verdicts, "
    "benchmark_deltas, server_runs, show, events_since and sql. Errors carry the CLI's exit "
    "codes: 3 invalid input, 4 conflict (the new state comes with it), 5 not found."
)


def malformed_answer(exc: Exception) -> SessionMessage:
    """The JSON-RPC error for a line that is no JSON-RPC message: -32700 when it is not JSON
    (or nested past the parser's depth limit), -32600 when it is JSON of another shape. Its
    ``id`` is null, as JSON-RPC 2.0 says when the request's id cannot be read."""
    kinds = {e.get("type") for e in exc.errors()} if isinstance(exc, ValidationError) else set()
    if isinstance(exc, ValidationError) and exc.errors()[0].get("input") == OVER_LONG:
        limit = f"{MAX_MESSAGE_BYTES >> 20} MiB"
        error = types.ErrorData(code=-32700, message=f"Parse error: a message line over {limit}")
        return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=None, error=error))
    parse = "json_invalid" in kinds or "recursion_loop" in kinds or not kinds
    code, words = (-32700, "Parse error") if parse else (-32600, "Invalid Request")
    if isinstance(exc, ValidationError) and exc.errors():
        detail = str(exc.errors()[0].get("msg", ""))[:200]
    else:
        detail = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
    error = types.ErrorData(code=code, message=f"{words}: {detail}")
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=None, error=error))


async def answer_malformed(
    wire: Any,
    checked: Any,
    write_stream: Any,
    after_initialize: Callable[[], None] = lambda: None,
) -> None:
    """Pass the messages read off the wire on to the server, and answer each line that does not
    read as one (the SDK hands it over as an exception, and its server dropped it in silence:
    an agent waited for an answer that never came) with a JSON-RPC error.

    ``after_initialize`` is called once, at the first message that is not an ``initialize``
    request (the client's ``notifications/initialized``: it has its answer)."""
    pending = True
    async with checked:
        async for item in wire:
            if isinstance(item, Exception):
                await write_stream.send(malformed_answer(item))
                continue
            if pending and getattr(item.message, "method", None) != "initialize":
                pending = False
                after_initialize()
            await checked.send(item)


def serve_stdio(app: McpApp) -> None:
    """Serve ``app`` on standard input and output until the client closes them; then cancel
    and wait for the calls still running and run the seat's exit hooks."""
    server = build_server(app)

    def fill_tools() -> None:
        # The tools' imports (DuckDB, the read model, the runners, their pydantic models) in
        # the background once ``initialize`` is answered, not while it is: on a busy machine
        # the two threads share one interpreter lock and the answer came twice as late.
        if isinstance(app.toolbox, LazyToolbox):
            threading.Thread(target=app.toolbox.ready, name="mcp-tools", daemon=True).start()

    async def main() -> None:
        # standard input read in lines of at most MAX_MESSAGE_BYTES (ledger.mcp.wire): the
        # SDK's own reader holds a whole line, however long
        with claimed_stdin() as stdin_fd:
            await serve(BoundedLines(stdin_fd))

    async def serve(stdin: BoundedLines) -> None:
        async with (
            stdio_server(stdin=stdin) as (wire, write_stream),  # type: ignore[arg-type]
            anyio.create_task_group() as group,
        ):
            checked_writer, checked = create_context_streams[SessionMessage | Exception](0)
            group.start_soon(answer_malformed, wire, checked_writer, write_stream, fill_tools)
            await server.run(checked, write_stream, server.create_initialization_options())
            group.cancel_scope.cancel()

    def stop(_signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt  # a client's SIGTERM: unwind through the finally below

    signal.signal(signal.SIGTERM, stop)
    try:
        anyio.run(main)
    except KeyboardInterrupt:
        pass
    finally:
        if not app.calls.shut_down():
            print("tuneledger mcp: calls still running at exit were abandoned", file=sys.stderr)
        for hook in reversed(app.seat.on_exit):
            hook()
