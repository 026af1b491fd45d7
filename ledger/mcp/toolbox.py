"""The MCP server's tools as data: a name, a JSON Schema in, a JSON Schema out, a handler.

Every tool of ``tuneledger mcp`` is a ``Tool`` in one ``Toolbox``: the generated
``record_<event_type>`` tools (``ledger.mcp.records``), the verbs and reads written here
(``ledger.mcp.verbs``, ``ledger.mcp.reads``) and the runners' long-running tools, which the
``runners`` package contributes through the ``tuneledger.mcp_tools`` entry point group (the
ledger never imports the runners). The server (``ledger.mcp.server``) lists and calls them;
``tuneledger mcp --list-tools`` prints them.

A handler is a plain function ``(arguments, call) -> dict``: it runs in a worker thread (every
ledger call blocks on DuckDB), returns the structured output, and raises ``LedgerError`` for a
refusal, which becomes an MCP tool error carrying the CLI's exit code and one-line message
(``ledger.mcp.errors``). ``call`` carries the server's ledger, actor and session, and the
progress and cancellation of this one call (``Call``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from pydantic import BaseModel, ConfigDict, ValidationError

from ledger.app import Writer
from ledger.errors import InvalidInput, NotFound
from schemas import Actor

if TYPE_CHECKING:  # DuckDB is imported when a tool first opens the ledger, not at start-up
    from ledger.store import LedgerStore

#: ``Call.progress``: (message, done, total), sent as an MCP progress notification.
ProgressFn = Callable[[str, float | None, float | None], None]


@dataclass
class Seat:
    """What the server was started with: the ledger, who writes, the default session.

    ``on_exit``: functions the server calls when the client goes (the runners stop the
    servers they started there), last registered first.
    """

    ledger: Path
    actor: Actor
    session_id: str | None
    on_exit: list[Callable[[], None]] = field(default_factory=list)
    #: Whether ``actor`` is the operator's ``--actor`` (then it is every call's), or the default
    #: the client's declared name replaces (``ledger.mcp.server.client_actor``).
    actor_given: bool = False

    def store(self) -> LedgerStore:
        """The one-shot store: each operation opens the file and closes it, so the MCP server
        never holds the ledger between calls (a CLI writer or the TUI gets it at once); with
        the derived tables it keeps current (``ledger.derive``), as the CLI's."""
        from ledger.store import LedgerStore

        return LedgerStore(self.ledger)

    def writable_store(self) -> LedgerStore:
        """The store for a tool that appends: a ledger that does not exist is not created
        (a mistyped path is not a new ledger; ``init_ledger`` creates one).

        Raises:
            InvalidInput: a name that cannot be a ledger (exit 3).
            NotFound: no ledger at the path (exit 5).
        """
        store = self.store()
        store.check_path()
        if not self.ledger.exists():
            raise NotFound(
                f"no ledger at {self.ledger} (create it with the init_ledger tool, "
                "or `tuneledger init`)"
            )
        return store


class Cancelled(KeyboardInterrupt):
    """Raised in a worker thread at a safe point once its call was cancelled: a
    ``KeyboardInterrupt`` so the runners unwind as they do on Ctrl-C (servers stopped, what
    completed recorded)."""


@dataclass(eq=False)  # each call is itself (kept in a set while it runs)
class Call:
    """One tool call: the server's seat, who it writes as, its progress reporter and its
    cancellation. ``actor``: set by the server from the client's declared name (or the
    seat's ``--actor``), never from the call's arguments; None: the seat's."""

    seat: Seat
    report: ProgressFn = lambda _message, _done, _total: None
    cancelled: threading.Event = field(default_factory=threading.Event)
    actor: Actor | None = None

    @property
    def writer(self) -> Writer:
        """The application layer's ``Writer`` of this call: its actor, the seat's session."""
        return Writer(self.actor or self.seat.actor, self.seat.session_id)

    def progress(self, message: str, done: float | None = None, total: float | None = None) -> None:
        """Tell the client how far the call is (an MCP progress notification; nothing when
        the client asked for none)."""
        self.report(message, done, total)

    def check_cancelled(self) -> None:
        """Raise ``Cancelled`` if the client cancelled this call (call it where stopping is safe)."""
        if self.cancelled.is_set():
            raise Cancelled("cancelled by the MCP client")


Handler = Callable[[dict[str, Any], Call], dict[str, Any]]

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class Tool:
    """One MCP tool. ``input_schema`` and ``output_schema`` are JSON Schemas (objects);
    ``read_only``, ``idempotent``, ``destructive``: the MCP tool annotations (hints to the
    client); ``long_running``: it reports progress and may take minutes (a plan)."""

    name: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    handler: Handler
    title: str | None = None
    read_only: bool = False
    idempotent: bool = False
    destructive: bool = False
    long_running: bool = False


class Toolbox:
    """The server's tools by name, in the order added (``tools/list`` keeps it)."""

    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}

    def add(self, tool: Tool) -> None:
        """Add ``tool``.

        Raises:
            ValueError: a tool of that name is already there (two plugins, one name).
        """
        if tool.name in self._tools:
            raise ValueError(f"MCP tool {tool.name!r} is defined twice")
        self._tools[tool.name] = tool

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)


class LazyToolbox(Toolbox):
    """A ``Toolbox`` filled by ``fill`` when first used: the server answers ``initialize``
    before the tools' modules (the runners, DuckDB, the read model) are imported, and
    ``serve_stdio`` fills it in the background meanwhile."""

    def __init__(self, fill: Callable[[Toolbox], None]) -> None:
        super().__init__()
        self._fill: Callable[[Toolbox], None] | None = fill
        self._filling = threading.RLock()  # a plugin looking a tool up while filling

    def ready(self) -> None:
        """Fill the toolbox if not yet done (once, whichever thread asks first)."""
        with self._filling:
            if self._fill is not None:
                fill, self._fill = self._fill, None
                fill(self)

    def get(self, name: str) -> Tool | None:
        self.ready()
        return super().get(name)

    def __iter__(self) -> Iterator[Tool]:
        self.ready()
        return super().__iter__()

    def __len__(self) -> int:
        self.ready()
        return super().__len__()


class Arguments(BaseModel):
    """Base of the hand-written tools' argument models: unknown arguments are refused (a
    misspelt argument silently ignored would be a wrong fact)."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())


def schema_of(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON Schema of ``model`` as a tool's input or output schema, without pydantic's
    generated titles ("Candidate Id" beside ``candidate_id``): a client reads ``tools/list``
    whole into the model's context, and those titles were a quarter of its bytes."""
    return cast(dict[str, Any], _untitled(model.model_json_schema(mode="validation")))


def input_schema_of(model: type[BaseModel]) -> dict[str, Any]:
    """``schema_of`` for arguments: an optional argument is its type, its default ``null``
    (pydantic spells it ``anyOf: [T, {"type": "null"}]``, a third of an argument's bytes; a
    client leaves the argument out rather than sending null, and the server takes both)."""
    return cast(dict[str, Any], _optional(schema_of(model)))


def _optional(node: Any) -> Any:
    if isinstance(node, list):
        return [_optional(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _optional(value) for key, value in node.items()}
    choices = out.get("anyOf")
    if isinstance(choices, list) and len(choices) == 2 and {"type": "null"} in choices:
        (kept,) = [c for c in choices if c != {"type": "null"}]
        del out["anyOf"]
        out = {**kept, **out}
        if out.get("default", 0) is None:  # left out is null: no need to say it
            del out["default"]
    return out


def _untitled(node: Any, *, names: bool = False) -> Any:
    """``node`` without its schemas' ``title`` keywords (``names``: ``node`` maps property
    names to schemas, where a property may be called ``title``)."""
    if isinstance(node, list):
        return [_untitled(item) for item in node]
    if not isinstance(node, dict):
        return node
    return {
        key: _untitled(value, names=key in ("properties", "$defs") and not names)
        for key, value in node.items()
        if names or not (key == "title" and isinstance(value, str))
    }


def parse_arguments(model: type[M], arguments: dict[str, Any], tool: str) -> M:
    """Validate a call's arguments into ``model``.

    Raises:
        InvalidInput: the first offending argument, named (exit 3).
    """
    try:
        return model.model_validate(arguments)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first.get("loc", ())) or "(arguments)"
        # an agent's argument name, shown in one line (a newline in it split the error: fuzz)
        where = "".join(c if c.isprintable() else repr(c)[1:-1] for c in where[:200])
        if first.get("type") == "missing":
            raise InvalidInput(f"{tool}: argument '{where}' is required") from None
        if first.get("type") == "extra_forbidden":
            raise InvalidInput(f"{tool}: '{where}' is not an argument of {tool}") from None
        raise InvalidInput(f"{tool}: argument '{where}': {first.get('msg', 'invalid')}") from None


def tool_from_models(
    name: str,
    description: str,
    arguments: type[M],
    output: type[BaseModel],
    run: Callable[[M, Call], dict[str, Any]],
    **hints: Any,
) -> Tool:
    """A ``Tool`` whose input and output schemas are those of two pydantic models; the handler
    gets the validated arguments."""

    def handler(raw: dict[str, Any], call: Call) -> dict[str, Any]:
        return run(parse_arguments(arguments, raw, name), call)

    return Tool(
        name=name,
        description=description,
        input_schema=input_schema_of(arguments),
        output_schema=schema_of(output),
        handler=handler,
        **hints,
    )
