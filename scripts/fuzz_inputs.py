"""Fuzz the input readers for N minutes: no traceback, no hang (docs/reliability.md).

    PYTHONPATH=. python scripts/fuzz_inputs.py --minutes 10

Targets, each a hypothesis test run in rounds until the time is up (new random cases each
round, nothing shrunk into the example database): the importers (``import_file`` on a
fixture of each format with bytes spliced in, and on arbitrary bytes), the config readers
(``load_configs``, ``load_plan``, ``load_spec`` on TOML built from its own tokens, nested
deep, and on arbitrary text), and the MCP argument decoder (``parse_arguments`` of every
tool's argument model on arbitrary JSON values, and the JSON-RPC line check of
``ledger.mcp.server``). A case passes when it returns or raises a ``LedgerError`` (one line,
its exit code); anything else is printed with its input and the run exits 1. Each case runs
under an alarm (``--case-s``): one that takes longer is a hang.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ledger.errors import LedgerError  # noqa: E402

FIXTURES = [
    ROOT / "tests/fixtures/sglang/bench_serving/with_details.jsonl",
    ROOT / "tests/fixtures/sglang/bench_serving/vllm_1129_16_64_32.jsonl",
]
TOML_TOKENS = [
    "[configs.a]\n", "[configs.b]\n", 'engine = "sglang"\n', 'model = "m"\n', "base = \"a\"\n",
    "flags = {", "}", "[", "]", "tp = 2\n", '"', "'", "=", ",", "\n", "env = {X = \"1\"}\n",
    "[plan]\n", "[[candidates]]\n", "[spec]\n", "[bench]\n", "concurrency = [1, 4]\n",
    "1e400", "-0", "nan", "inf", "9" * 30, "\\u0000", "\x00", "\ud7ff", "é", "#",
]  # fmt: skip


class Hang(Exception):
    pass


def _alarm(_signum: int, _frame: Any) -> None:
    raise Hang


class Fuzz:
    def __init__(self, case_s: float) -> None:
        self.case_s = case_s
        self.cases = 0
        self.failures: list[str] = []
        self.folder = Path(tempfile.mkdtemp(prefix="tl-fuzz-"))

    def check(self, what: str, run: Callable[[], Any], shown: Any) -> None:
        self.cases += 1
        signal.setitimer(signal.ITIMER_REAL, self.case_s)
        try:
            run()
        except LedgerError as exc:
            if "\n" in str(exc):
                self.failures.append(f"{what}: two lines: {exc!r} for {shown!r:.300}")
        except Hang:
            self.failures.append(f"{what}: no answer in {self.case_s} s for {shown!r:.300}")
        except Exception:
            self.failures.append(f"{what}: {traceback.format_exc()} for {shown!r:.300}")
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)

    def file(self, data: bytes, suffix: str) -> Path:
        path = self.folder / f"case{suffix}"
        path.write_bytes(data)
        return path


def targets(fuzz: Fuzz) -> list[Callable[[], None]]:
    from ledger.importers import import_file
    from ledger.input_files import parse_json
    from ledger.mcp.command import build_app
    from ledger.mcp.server import malformed_answer
    from ledger.mcp.toolbox import Arguments, LazyToolbox, parse_arguments
    from ledger.store import LedgerStore
    from runners.plan_file import load_plan
    from runners.server.configs import load_configs
    from runners.spec import load_spec
    from schemas import Actor

    ledger = fuzz.folder / "l.duckdb"
    LedgerStore(ledger).init()
    app = build_app(ledger, Actor.parse("agent:fuzz"), None, allow_run=True)
    if isinstance(app.toolbox, LazyToolbox):
        app.toolbox.ready()  # the tools' modules are imported once the server is up: now
    models: list[type[Arguments]] = []
    todo = list(Arguments.__subclasses__())
    while todo:
        model = todo.pop()
        models.append(model)
        todo.extend(model.__subclasses__())
    assert models, "no MCP argument model found to fuzz"
    fixtures = [path.read_bytes() for path in FIXTURES]
    common = settings(
        max_examples=50,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )

    @common
    @given(st.sampled_from(fixtures), st.integers(0, 10_000), st.binary(max_size=64))
    def importers(base: bytes, at: int, splice: bytes) -> None:
        data = base[:at] + splice + base[at + len(splice) :]
        path = fuzz.file(data, ".jsonl")
        fuzz.check("import_file", lambda: import_file(path), data[at : at + 80])

    @common
    @given(st.binary(max_size=2048))
    def importers_bytes(data: bytes) -> None:
        path = fuzz.file(data, ".json")
        fuzz.check("import_file", lambda: import_file(path), data)

    toml = st.lists(st.sampled_from(TOML_TOKENS), max_size=60).map("".join) | st.builds(
        lambda n, open_, close: f"a = {open_ * n}1{close * n}\n",
        st.integers(1, 6000),
        st.sampled_from(["[", "{b = "]),
        st.sampled_from(["]", "}"]),
    )

    @common
    @given(toml | st.text(max_size=500), st.sampled_from(["configs", "plan", "spec"]))
    def config_readers(text: str, kind: str) -> None:
        path = fuzz.file(text.encode("utf-8", "surrogatepass"), ".toml")
        reader = {"configs": load_configs, "plan": load_plan, "spec": load_spec}[kind]
        fuzz.check(kind, lambda: reader(path), text)

    json_values = st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner),
        max_leaves=20,
    )

    @common
    @given(st.sampled_from(models), json_values)
    def mcp_arguments(model: type[Arguments], value: Any) -> None:
        names = list(model.model_fields)
        arguments = value if isinstance(value, dict) else {}
        if names and not isinstance(value, dict):
            arguments = {random.choice(names): value}
        fuzz.check(model.__name__, lambda: parse_arguments(model, arguments, "t"), arguments)

    @common
    @given(
        st.text(max_size=300)
        | json_values.map(json.dumps)
        | st.integers(1, 200_000).map(lambda n: "[" * n)
    )
    def json_rpc_lines(line: str) -> None:
        import mcp_types as types

        def run() -> None:
            try:
                types.jsonrpc_message_adapter.validate_json(line, by_name=False)
            except Exception as exc:
                malformed_answer(exc).message.model_dump_json()
            parse_json(line, "<line>")

        fuzz.check("json-rpc line", run, line)

    return [importers, importers_bytes, config_readers, mcp_arguments, json_rpc_lines]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--case-s", type=float, default=30.0, help="a case past this is a hang")
    args = parser.parse_args()
    os.environ.setdefault("TUNELEDGER_RESIDENT", "0")
    signal.signal(signal.SIGALRM, _alarm)
    fuzz = Fuzz(args.case_s)
    runs = targets(fuzz)
    end = time.monotonic() + args.minutes * 60
    rounds = 0
    while time.monotonic() < end and not fuzz.failures:
        for run in runs:
            run()
        rounds += 1
    minutes = args.minutes - (end - time.monotonic()) / 60
    print(
        f"{fuzz.cases} cases in {minutes:.1f} min ({rounds} rounds): {len(fuzz.failures)} failures"
    )
    for failure in fuzz.failures[:20]:
        print(failure)
    return 1 if fuzz.failures else 0


if __name__ == "__main__":
    sys.exit(main())
