"""Where a server start goes and what it does not run: the functions each engine's start
reaches though nothing calls them by name, the CLI's other programs, and the flags a start-up
function sets itself before it tests them (the value parsed is not the one tested).

Kept apart from ``gates`` (which asks these questions of a call path) so that each stays
small."""

from __future__ import annotations

from .index import VersionIndex
from .model import StoreSite

#: Where every server start goes, in each engine: (module, qualified name). A path that
#: reaches one is followed to its end: these run in each start's processes, though nothing in
#: the package calls them by name (SGLang starts its scheduler and detokenizer processes with
#: ``Process(target=...)`` of a function passed down as a parameter; vLLM builds its worker
#: class from a qualified name in its config and calls the worker's steps over RPC by their
#: names, ``collective_rpc("load_model")``). A class here is one that is built at start.
#: docs/research.md, *Entry points*.
START_ROOTS: dict[str, frozenset[tuple[str, str]]] = {
    "sglang": frozenset(
        {
            ("sglang.srt.managers.scheduler", "run_scheduler_process"),
            # the scheduler process builds its ``Scheduler`` whatever the flags: a read under
            # the scheduler's construction is as deep as its own callers, not theirs as well
            ("sglang.srt.managers.scheduler", "Scheduler"),
            ("sglang.srt.managers.detokenizer_manager", "run_detokenizer_process"),
        }
    ),
    "vllm": frozenset(
        {
            # ``vllm serve``: the subcommand the server is started with (dispatched through
            # argparse's defaults, so no call names it)
            ("vllm.entrypoints.cli.serve", "ServeSubcommand.cmd"),
            ("vllm.v1.engine.core", "EngineCoreProc.run_engine_core"),
            ("vllm.v1.worker.gpu_worker", "Worker"),
            *(
                ("vllm.v1.worker.gpu_worker", f"Worker.{step}")
                for step in (
                    "init_device",
                    "load_model",
                    "determine_available_memory",
                    "initialize_from_config",
                    "compile_or_warm_up_model",
                    "get_kv_cache_spec",
                )
            ),
        }
    ),
}

#: The engine's command-line programs: each subcommand is a class deriving this base, and the
#: server is started with one of them (``vllm serve``); another's code (``vllm bench``,
#: ``vllm launch render``) never runs in the server, whatever calls it or not.
PROGRAMS: dict[str, tuple[str, str]] = {"vllm": ("CLISubcommand", "ServeSubcommand")}


def other_program(index: VersionIndex, cls: str) -> str | None:
    """Why ``cls`` never runs in the server: a subcommand of the CLI other than the serving
    one (its base named in ``PROGRAMS``). None for any other name."""
    base, serving = PROGRAMS.get(index.engine, ("", ""))
    if not base or not cls[:1].isupper() or cls in (base, serving):
        return None
    lineage = index.lineage(cls)
    if base not in lineage or serving in lineage:
        return None
    return f"{cls} is a program of its own: the server runs {serving}"


class FunctionStores:
    """The index's flag stores by the function that makes them (path, function), built on
    first use: the one table the judge and the gates ask."""

    def __init__(self, index: VersionIndex) -> None:
        self.index = index
        self._by_function: dict[tuple[str, str], list[StoreSite]] | None = None

    def by_function(self) -> dict[tuple[str, str], list[StoreSite]]:
        if self._by_function is None:
            self._by_function = {}
            for listed in self.index.stores.values():
                for store in listed:
                    where = (store.site.path, store.scope.function)
                    self._by_function.setdefault(where, []).append(store)
        return self._by_function

    def rewritten_before(self, path: str, function: str, line: int, flags: set[str]) -> str | None:
        """One of ``flags`` that the function stores to before ``line``, outside the argument
        layer the resolution walks: vLLM's serve command fills in ``args.api_server_count`` when
        it is None, then tests it."""
        stores = self.by_function().get((path, function), [])
        return next(
            (s.flag for s in stores if not s.handling and s.flag in flags and s.site.line < line),
            None,
        )
