"""The write layer (``ledger/write/``: commands, the bulk import, replicated rows): every writer
appends through it, and its rules (``ledger/write/rules.py``) hold through every front end that
can break them.

Front ends of each rule and where they are tested:

- a retraction names a stored event: CLI ``append`` (options, stdin, the bulk path), and
  ``commands.retract`` (here); replicated rows by ``ledger.write.replicated`` (test_sync.py);
- a triage passes the candidate stream's expected version: CLI ``append`` (here, and
  tests/tui/test_tui_live.py passes it from another process), the TUI's triage action
  (tests/tui/test_tui_actions.py: ``test_accept_and_defer_append_triage_with_expected_version``,
  ``test_stale_triage_is_a_conflict_and_refreshes``), the bulk path (here);
- a proposal opens its candidate stream: the TUI's propose form
  (``test_proposing_an_existing_id_is_refused``), the plan runner (here);
- the previous server run, one definition: ``import`` (one call or two) and the server
  runner (here; the runner's capacity findings in tests/runners/test_runner_server.py).
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from uuid import UUID

import pytest

from ledger.cli.commands.append import REFUSED_FIELDS
from ledger.errors import ConcurrencyConflict, NotFound
from ledger.importers.ingest import import_files
from ledger.store import LedgerStore
from ledger.write import commands
from schemas import Actor, CandidateProposed, NoteAdded, ServerReady, StartupFacts
from tests.support.cli_inprocess import invoke

ROOT = Path(__file__).resolve().parents[2]
#: The case's copy in the repository (tests/fixtures/MANIFEST.md): a fast test reads no folder
#: outside it (tests/project/test_any_machine.py).
CAPACITY_CASE = ROOT / "tests" / "fixtures" / "cases" / "sglang-pr29927-spec-capacity-drop"
ME = Actor(kind="agent", name="test")

# --- no writer goes around the write layer ----------------------------------------------

#: Modules that may call the store's append methods themselves, and why: the store, and the
#: write layer's paths (each applies ``ledger.write.rules``).
ALLOWED = {
    "ledger/store/ledger_store.py": "the store itself",
    "ledger/write/commands.py": "the careful and column paths (events, rows, one table)",
    "ledger/write/bulk.py": "the chunked path (the bulk import)",
    "ledger/write/replicated.py": "the replicated path (rows pulled from a sync hub)",
}
#: The store's write methods: every public method of ``LedgerStore`` that appends.
APPEND_METHODS = {
    "append",
    "append_rows",
    "append_columns",
    "append_column_chunks",
    "append_replicated",
}
#: A receiver that is a ledger store by the package's naming (``store``, ``self.store``,
#: ``ctx.store()``, ``LedgerStore(...)``); a list's ``.append`` is not.
STORE_RECEIVER = re.compile(r"(^|\.|_)store(\(\))?$|^LedgerStore\(")


def _store_names(tree: ast.AST) -> set[str]:
    """Names the module gives a ledger store: parameters and variables annotated
    ``LedgerStore``, and targets assigned a ``LedgerStore(...)``."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.arg) and node.annotation is not None:
            if "LedgerStore" in ast.unparse(node.annotation):
                names.add(node.arg)
        elif isinstance(node, ast.AnnAssign) and "LedgerStore" in ast.unparse(node.annotation):
            names.add(ast.unparse(node.target))
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            if ast.unparse(node.value.func).endswith("LedgerStore"):
                names.update(ast.unparse(target) for target in node.targets)
    return names


def _direct_appends(path: Path, root: Path = ROOT) -> list[str]:
    """``file:line: code`` (relative to ``root``) for each use of a store's append method in
    ``path`` (a call, or the bound method passed on, e.g. to ``asyncio.to_thread``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    stores = _store_names(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in APPEND_METHODS:
            receiver = ast.unparse(node.value)
            if receiver == "commands":  # ledger.write.commands.append: the way in
                continue
            if node.attr != "append" or receiver in stores or STORE_RECEIVER.search(receiver):
                found.append(f"{path.relative_to(root)}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_module_outside_the_command_layer_appends_directly() -> None:
    offenders = []
    for package in ("schemas", "ledger", "runners", "tui"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if path.relative_to(ROOT).as_posix() not in ALLOWED:
                offenders += _direct_appends(path)
    assert offenders == [], "append through ledger.write.commands instead:\n" + "\n".join(offenders)


def test_the_check_lists_every_write_method_of_the_store() -> None:
    public = {name for name in vars(LedgerStore) if not name.startswith("_")}
    writes = {name for name in public if name.startswith("append")}
    assert writes == APPEND_METHODS


def test_the_check_sees_the_forms_it_must(tmp_path: Path) -> None:
    """The guard itself: each way a module could reach the store's append is caught."""
    code = tmp_path / "m.py"
    code.write_text(
        "store.append(e)\nself.store.append(e)\nctx.store().append(e)\n"
        "asyncio.to_thread(store.append, e)\nx.append_rows(r)\nLedgerStore(p).append(e)\n"
        "events.append(e)\nrestore.append(e)\ncommands.append(store, e)\n"
        "def f(s: LedgerStore, out: list):\n    s.append(e)\n    out.append(e)\n"
        "ledger = LedgerStore(p)\nledger.append(e)\nstore.append_column_chunks(parts)\n"
    )
    lines = sorted(int(hit.split(":")[1]) for hit in _direct_appends(code, tmp_path))
    assert lines == [1, 2, 3, 4, 5, 6, 11, 14, 15]


# --- the CLI, in process -------------------------------------------------------------------


@pytest.fixture
def cli(ledger_path: Path):
    """Run ``tuneledger --ledger L ARGS`` in this process; return (exit code, stdout, stderr)."""

    def run(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
        out = invoke(["--ledger", ledger_path, "--actor", "agent:test", *args], stdin=stdin)
        return out.returncode, out.stdout, out.stderr

    assert run("init")[0] == 0
    return run


def _count(store: LedgerStore, kind: str | None = None) -> int:
    where = f" WHERE type = '{kind}'" if kind else ""
    return store.query_arrow(f"SELECT count(*) AS n FROM events{where}")["n"][0].as_py()


def _propose(cli, cid: str = "flag:x") -> None:
    code, _, err = cli(
        "append",
        "candidate_proposed",
        "-f",
        f"candidate_id={cid}",
        "-f",
        "title=x",
        "-f",
        "kind=flag",
    )
    assert code == 0, err


def test_cli_triage_without_an_expected_version_is_refused(cli, ledger_path: Path) -> None:
    _propose(cli)
    code, _, err = cli(
        "append", "candidate_triaged", "-f", "candidate_id=flag:x", "-f", "status=accepted"
    )
    assert code == 3
    assert (
        "options: candidate_triaged flag:x: a triage needs the candidate stream's expected" in err
    )
    assert "--expected-version" in err and err.count("\n") == 1
    assert _count(LedgerStore(ledger_path), "candidate_triaged") == 0


def test_cli_triage_with_a_stale_version_is_a_conflict(cli, ledger_path: Path) -> None:
    _propose(cli)
    triage = ("append", "candidate_triaged", "-f", "candidate_id=flag:x", "-f", "status=accepted")
    assert cli(*triage, "--expected-version", "1")[0] == 0
    # A second writer that read the board at version 1 too:
    code, _, err = cli(*triage, "--expected-version", "1")
    assert code == 4 and "expected version 1, found 2" in err
    assert _count(LedgerStore(ledger_path), "candidate_triaged") == 1


def test_cli_triage_of_a_candidate_never_proposed_is_not_found(cli, ledger_path: Path) -> None:
    """A typo in the candidate id is exit 5 naming it, not a version conflict (exit 4: found by
    a new user's try)."""
    triage = (
        "append",
        "candidate_triaged",
        "-f",
        "candidate_id=flag:nosuch",
        "-f",
        "status=accepted",
    )
    code, _, err = cli(*triage, "--expected-version", "1")
    assert code == 5 and "flag:nosuch" in err and "proposed" in err
    assert _count(LedgerStore(ledger_path), "candidate_triaged") == 0


def test_cli_triage_expecting_version_0_of_a_proposed_candidate_is_a_conflict(
    cli, ledger_path: Path
) -> None:
    """`--expected-version 0` on a proposed candidate said "never proposed" (exit 5): the
    candidate is there, the version given is stale: a conflict (exit 4) naming the version found.
    A candidate nobody proposed stays exit 5."""
    _propose(cli)
    triage = ("append", "candidate_triaged", "-f", "status=accepted", "--expected-version", "0")
    code, _, err = cli(*triage, "-f", "candidate_id=flag:x")
    assert code == 4 and "expected version 0, found 1" in err, err
    code, _, err = cli(*triage, "-f", "candidate_id=flag:nosuch")
    assert code == 5 and "no candidate 'flag:nosuch' was proposed" in err
    assert _count(LedgerStore(ledger_path), "candidate_triaged") == 0


def test_cli_triage_in_a_batch_carries_its_own_stream_version(cli, ledger_path: Path) -> None:
    """A batch spans streams, so --expected-version cannot apply: each triage gives the
    version it must get (expected + 1) instead."""
    _propose(cli)
    note = {"type": "note_added", "text": "why"}
    triage = {"type": "candidate_triaged", "candidate_id": "flag:x", "status": "deferred"}
    code, _, err = cli("append", stdin=json.dumps([note, triage]))
    assert code == 3 and "<stdin>: event 2: candidate_triaged flag:x" in err
    code, _, err = cli("append", stdin=json.dumps([note, {**triage, "stream_version": 2}]))
    assert code == 0, err
    code, _, err = cli("append", stdin=json.dumps([note, {**triage, "stream_version": 2}]))
    assert code == 4  # a stale one: its stream is at 2 now
    assert _count(LedgerStore(ledger_path)) == 3


def test_cli_retraction_must_name_a_stored_event(cli, ledger_path: Path) -> None:
    code, out, _ = cli("append", "note_added", "-f", "text=typo", "--json")
    note_id = json.loads(out)[0]["event_id"]
    missing = "00000000-0000-7000-8000-000000000001"
    code, _, err = cli(
        "append", "event_retracted", "-f", f"retracted_event_id={missing}", "-f", "reason=x"
    )
    assert code == 5
    assert f"options: event_retracted: no event {missing} to retract" in err
    assert "a retraction must name a stored event" in err
    # In a batch: the event is named by its position, and nothing of the batch is stored.
    batch = [
        {"type": "event_retracted", "retracted_event_id": note_id, "reason": "typo"},
        {"type": "event_retracted", "retracted_event_id": missing, "reason": "x"},
    ]
    code, _, err = cli("append", stdin=json.dumps(batch))
    assert code == 5 and f"<stdin>: event 2: event_retracted: no event {missing}" in err
    assert _count(LedgerStore(ledger_path)) == 1
    assert cli("append", stdin=json.dumps(batch[:1]))[0] == 0


def test_cli_retraction_of_an_event_earlier_in_the_same_batch(cli, ledger_path: Path) -> None:
    note = NoteAdded(text="oops")
    dumped = json.loads(note.model_dump_json())
    batch = [
        {k: v for k, v in dumped.items() if k not in REFUSED_FIELDS},  # the ledger sets those
        {"type": "event_retracted", "retracted_event_id": str(note.event_id), "reason": "oops"},
    ]
    code, _, err = cli("append", stdin=json.dumps(batch))
    assert code == 0, err
    assert _count(LedgerStore(ledger_path)) == 2


def _bulk_lines(extra: dict) -> str:
    """Enough JSON lines for the CLI's bulk path (ledger.write.bulk), ``extra`` last."""
    from ledger.cli.commands.append import BULK_MIN_LINES

    notes = [json.dumps({"type": "note_added", "text": f"n{i}"}) for i in range(BULK_MIN_LINES)]
    return "\n".join([*notes, json.dumps(extra)]) + "\n"


def test_bulk_path_keeps_the_triage_rule(cli, ledger_path: Path) -> None:
    _propose(cli)
    triage = {"type": "candidate_triaged", "candidate_id": "flag:x", "status": "accepted"}
    code, _, err = cli("append", stdin=_bulk_lines(triage))
    assert code == 3 and "candidate_triaged flag:x: a triage needs" in err
    assert _count(LedgerStore(ledger_path)) == 1
    code, _, err = cli("append", stdin=_bulk_lines({**triage, "stream_version": 2}))
    assert code == 0, err


def test_bulk_path_keeps_the_retraction_rule(cli, ledger_path: Path) -> None:
    missing = "00000000-0000-7000-8000-000000000002"
    retraction = {"type": "event_retracted", "retracted_event_id": missing, "reason": "x"}
    code, _, err = cli("append", stdin=_bulk_lines(retraction))
    assert code == 5 and f"no event {missing} to retract" in err
    assert _count(LedgerStore(ledger_path)) == 0


# --- the commands themselves ------------------------------------------------------------------


def test_retract_resolves_a_prefix_and_refuses_an_unknown_id(store: LedgerStore) -> None:
    [note] = commands.append(store, NoteAdded(text="wrong number", session_id="s"))
    result = commands.retract(store, str(note.event_id)[:13], reason="typo", actor=ME)
    retraction = store.get(result.event_id)
    assert retraction.retracted_event_id == note.event_id  # type: ignore[attr-defined]
    assert retraction.session_id == "s"
    with pytest.raises(NotFound, match="not found"):
        commands.retract(store, "0123456789abcdef", reason="x", actor=ME)
    assert _count(store) == 2


def test_triage_needs_the_version_it_read(store: LedgerStore) -> None:
    commands.propose_candidate(store, CandidateProposed(kind="flag", candidate_id="c", title="c"))
    args = dict(candidate_id="c", status="accepted", actor=ME)
    commands.triage(store, expected_version=1, **args)
    with pytest.raises(ConcurrencyConflict):
        commands.triage(store, expected_version=1, **args)
    with pytest.raises(ConcurrencyConflict):  # proposing an id twice
        commands.propose_candidate(
            store, CandidateProposed(kind="flag", candidate_id="c", title="again")
        )


def test_restore_loads_recorded_triages_but_not_dangling_retractions(store: LedgerStore) -> None:
    from schemas import CandidateTriaged, EventRetracted

    history = [
        CandidateProposed(kind="flag", candidate_id="c", title="c"),
        CandidateTriaged(candidate_id="c", status="accepted"),
    ]
    assert len(commands.restore(store, history)) == 2
    dangling = EventRetracted(retracted_event_id=UUID(int=7), reason="x")
    with pytest.raises(NotFound):
        commands.restore(store, [NoteAdded(text="n"), dangling])
    assert _count(store) == 2


# --- the plan runner's proposals ------------------------------------------------------------


class _RacingStore(LedgerStore):
    """A test double for a race that cannot be provoked from outside: right after the plan
    runner reads the board, another writer proposes the same candidate."""

    def query_arrow(self, sql, params=None):  # type: ignore[no-untyped-def]
        table = super().query_arrow(sql, params)
        if "FROM board" in sql and not getattr(self, "raced", False):
            self.raced = True
            super().append(
                CandidateProposed(kind="flag", candidate_id="flag:enable-x", title="by a person")
            )
        return table


def test_plan_proposal_racing_another_writer_is_not_proposed_twice(tmp_path: Path) -> None:
    from runners.plan import _record_preamble, load_plan

    plan_file = tmp_path / "plan.toml"
    plan_file.write_text(
        """
[plan]
baseline = "base"
concurrency = [1]

[[candidates]]
config = "with-x"
flag = "enable-x"

[configs.base]
model = "m"
flags = {}

[configs.with-x]
base = "base"
flags = { enable-x = true }
"""
    )
    store = _RacingStore(tmp_path / "l.duckdb")
    store.init()
    _record_preamble(store, load_plan(plan_file))
    proposals = store.read(types=["candidate_proposed"])
    assert [e.title for e in proposals] == ["by a person"]  # type: ignore[attr-defined]
    # A candidate whose proposal was retracted is proposed again, after its stream's events.
    commands.retract(store, proposals[0].event_id, reason="wrong", actor=ME)
    _record_preamble(LedgerStore(store.path), load_plan(plan_file))
    assert _count(store, "candidate_proposed") == 2
    assert store.query_arrow("SELECT candidate_id FROM board")["candidate_id"].to_pylist() == [
        "flag:enable-x"
    ]


# --- the previous server run: one definition ---------------------------------------------------


def _capacity(store: LedgerStore) -> list[str]:
    return store.query_arrow(
        "SELECT payload->>'message' AS m FROM live_events "
        "WHERE type = 'finding_recorded' AND payload->>'kind' = 'capacity-reduced' ORDER BY seq"
    )["m"].to_pylist()


def test_import_compares_with_the_previous_run_in_one_call_or_two(tmp_path: Path) -> None:
    run1, run2 = CAPACITY_CASE / "run1_no_spec.log", CAPACITY_CASE / "run2_eagle.log"
    together = LedgerStore(tmp_path / "one.duckdb")
    import_files(together, [run1, run2], session_id="s", actor=ME)
    apart = LedgerStore(tmp_path / "two.duckdb")
    import_files(apart, [run1], session_id="s", actor=ME)
    import_files(apart, [run2], session_id="s", actor=ME)
    expected = ["max_total_num_tokens 405504 -> 110592 (-73%) against the previous run"]
    assert _capacity(together) == _capacity(apart) == expected
    # The view pairs the same two runs.
    for store in (together, apart):
        rows = store.query_arrow(
            "SELECT run_id, previous_run_id FROM server_runs ORDER BY started_seq"
        ).to_pylist()
        assert rows[1]["previous_run_id"] == rows[0]["run_id"]


def test_previous_run_is_the_one_started_before_as_in_the_view(store: LedgerStore) -> None:
    """The runner's and import's "previous run" is the ``server_runs`` view's pairing: the
    session's run started just before, whatever became of it."""
    from runners.server.runner import ServerRunner
    from schemas import ServerFailed, ServerStarted

    def run(run_id: str, mrr: int | None, session: str = "s") -> list:
        started = ServerStarted(run_id=run_id, engine="sglang", session_id=session)
        if mrr is None:  # died before logging any startup fact
            return [
                started,
                ServerFailed(run_id=run_id, cause="crash", message="x", session_id=session),
            ]
        facts = StartupFacts(max_running_requests=mrr)
        return [started, ServerReady(run_id=run_id, startup=facts, session_id=session)]

    events = run("r1", 48) + run("r2", 26) + run("other", 1, session="t") + run("r3", None)
    commands.append(store, events)

    def mrr(facts: StartupFacts | None) -> int | None:
        return facts.max_running_requests if facts else None

    runner = ServerRunner(store, session_id="s")
    assert mrr(commands.previous_startup(store, "s", run_id="r3")) == 26
    assert mrr(runner.previous_startup("r3")) == 26
    assert mrr(runner.previous_startup("r2")) == 48
    assert runner.previous_startup("r1") is None
    # The latest run (what a log being imported is compared with) logged no facts: nothing
    # to compare, as the view's changes_vs_previous says nothing either.
    assert commands.previous_startup(store, "s") is None
    view = store.query_arrow(
        "SELECT run_id, previous_run_id FROM server_runs WHERE session_id = 's' ORDER BY started_seq"
    ).to_pylist()
    assert [(r["run_id"], r["previous_run_id"]) for r in view] == [
        ("r1", None),
        ("r2", "r1"),
        ("r3", "r2"),
    ]
    commands.retract(store, events[2].event_id, reason="wrong run", actor=ME)  # r2 started
    assert mrr(commands.previous_startup(store, "s", run_id="r3")) == 48
    assert mrr(commands.previous_startup(store, "t")) == 1
    assert commands.previous_startup(store, "nobody") is None
    assert commands.previous_startup(LedgerStore(store.path.with_name("none.duckdb")), "s") is None
