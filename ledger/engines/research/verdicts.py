"""One verdict per flag, for one engine version on one arch and model, with its evidence.

- ``dead-code``: no code outside the argument layer reads it, and the argument layer derives
  nothing from it;
- ``overridden``: the engine's resolution replaces the value given (its warning quoted);
- ``incompatible``: the engine's resolution refuses the value given (its message quoted);
- ``not-activated``: every read is behind a condition that fails on this arch or model;
- ``no-op``: every read is behind a condition that fails because of other flags' values;
- ``conditional``: a read's conditions depend on something only known at run time (named);
- ``effective``: read under conditions that all hold here.

A verdict names the version and the target it holds for; nothing here is a table of known
flags: every answer comes from the conditions found in the source.
"""

from __future__ import annotations

import re
from typing import Any

from .gates import GateEval, GateEvaluator, Reach, is_assumed_note
from .handed import handed_reach
from .index import VersionIndex
from .model import ReadSite, Site, StoreSite
from .outside import outside_reach
from .records import Change, Refusal
from .reports import (
    Evidence,
    FlagReport,
    OverrideResult,
    ReaderResult,
    from_change,
    override_text,
    reader_text,
)
from .resolve import Resolution
from .values import CALLERS, ENV, FLAG, HARDWARE, MODEL, PARALLEL, Fact, Unknown, show

#: Reads of a given flag whose functions are walked for a refusal, and reads looked at.
_PROBED_READERS = 6
_CLOSE_READERS = 24
_RESOLUTION_METHODS = re.compile(
    r"^(_|__post_init__|check|validate|resolve|add_cli|from_cli|handle|create_\w*config)"
)
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


#: Functions whose reads are not uses: a hash of the configuration, its printed form.
_NOT_USES = frozenset(
    {"compute_hash", "__hash__", "__repr__", "__str__", "__rich_repr__", "__eq__", "__format__"}
)


def _is_runtime_read(read: ReadSite, index: VersionIndex) -> bool:
    """A read outside argument resolution: what the server does with the value (a hash of it,
    its printed form or a log line echoing it are not)."""
    if read.use == "log" or read.scope.function.split(".")[-1] in _NOT_USES:
        return False
    if not read.handling:
        return True
    scope = read.scope
    if scope.class_name in index.access.self_classes and scope.function != "<module>":
        method = scope.function.split(".")[-1]
        return not _RESOLUTION_METHODS.match(method)
    return False


class Judge:
    """Verdicts for the flags of one version against one target and resolution."""

    def __init__(
        self, index: VersionIndex, evaluator: GateEvaluator, resolution: Resolution
    ) -> None:
        self.index = index
        self.evaluator = evaluator
        self.resolution = resolution
        self.couplings = self._static_couplings()
        self._depth = 0
        self._changes_reading: dict[str, list[Change]] = {}
        for change in resolution.changes:
            for name in change.flags_read():
                self._changes_reading.setdefault(name, []).append(change)

    def _static_couplings(self) -> dict[str, list[StoreSite]]:
        """For each flag, the argument layer's assignments of other flags that read it."""
        out: dict[str, list[StoreSite]] = {}
        fields = set(self.index.definitions)
        for stores in self.index.stores.values():
            for store in stores:
                if not store.handling:
                    continue
                words = set(_WORD.findall(store.value_text))
                for gate in store.gates:
                    words.update(_WORD.findall(gate.text))
                for name in (words & fields) - {store.flag}:
                    out.setdefault(name, []).append(store)
        return out

    def report(self, field_name: str, depth: int = 0) -> FlagReport:
        self._depth = depth
        try:
            return self._report(field_name)
        finally:
            self._depth = 0

    def _report(self, field_name: str) -> FlagReport:
        definition = self.index.definitions[field_name]
        state = self.resolution.state
        is_given = field_name in state.given
        given = self.evaluator.interp.target.flags.get(field_name)
        resolved = state.values.get(field_name)
        report = FlagReport(
            self.index.engine,
            self.index.version,
            definition.name,
            field_name,
            definition,
            "unknown",
            "",
            given,
            is_given,
            resolved,
        )
        site = definition.evidence_site()
        if site is not None:
            report.evidence.append(Evidence(str(site), f"defined: --{definition.name}"))
        reads = self.index.reads.get(field_name, [])
        runtime = [r for r in reads if _is_runtime_read(r, self.index)]
        closely = is_given or self._depth > 0
        report.readers = self.readers(runtime, every=closely)
        if closely:
            self._probe(report, runtime)
        report.overrides = self.overrides(field_name)
        report.couplings = self.coupled(field_name)
        report.refusals = [
            r for r in self.resolution.refusals if field_name in r.flags_read() and r.certain
        ] + self.resolution.caused.get(field_name, [])
        self.decide(report, runtime)
        report.confidence = self.confidence(report, is_given)
        return report

    def possible_refusal(self, field_name: str) -> Refusal | None:
        """A refusal of the resolution that reads the flag, none of whose conditions fails."""
        for refusal in self.resolution.refusals:
            if (
                field_name in refusal.flags_read()
                and not refusal.certain
                and all(c.value is not False for c in refusal.conditions)
            ):
                return refusal
        return None

    def confidence(self, report: FlagReport, is_given: bool = True) -> str:
        """How far the verdict can be trusted: ``proven`` only where every path to it was
        followed and every condition deciding it was decided from the source."""
        complete = self.resolution.complete
        verdict = report.verdict
        for reader in report.readers:
            for note in reader.reach.unresolved:
                if note not in report.unresolved:
                    report.unresolved.append(note)
        if report.confidence != "unknown" and verdict != "unknown":
            return report.confidence  # set where the verdict was made (a translated flag)
        if verdict == "unknown":
            return "unknown"
        if is_given and verdict != "incompatible":
            maybe = self.possible_refusal(report.field)
            if maybe is not None:
                # a refusal that reads the flag on the start path, under a condition the walk
                # cannot decide (vLLM's ``ray_workers_use_nsight and not self.use_ray``): the
                # engine may not start at all, so no verdict about its effect is decided
                report.unresolved.append(
                    f"the engine may refuse it: {maybe.message!r} ({maybe.site})"
                )
                return "unknown"
        if verdict == "dead-code":
            return "proven"  # no read, no string use, nothing derived: holds on any path
        if verdict == "overridden" or (verdict == "incompatible" and report.refusals):
            return "proven" if complete else "likely"
        if verdict == "incompatible":
            return "likely"  # a reading function that raises, walked with unknown arguments
        if verdict in ("conditional", "effective"):
            # Never more than ``unknown``. A ``conditional`` names conditions the walk could
            # not decide, and on the blind sets A-H those verdicts were right 25 times in 72
            # where they were called ``likely``; an ``effective`` (a read reached with every
            # condition found holding) 2 in 10, as a layer, a backend or a cache only some
            # models or settings build is gated where the walk does not look. Calibrated on
            # sets A-H, measured on the next blind set: docs/research.md, the fifth round.
            return "unknown"
        readers = report.readers
        # not-activated, no-op: every read found is off; callers matched by name, or the
        # model files a scope left out, may be wrong where the gates a read's own are not
        # a gate outside the read's own file (an importer's ``if``, a caller's) rests on the
        # importers and callers found, which may not be all: not ``proven``
        caller = any(
            g.value is False
            and (
                g.kind in ("caller", "model-scope")
                or g.site.path != r.site.path
                or any(f.kind == CALLERS for f in g.facts)  # a default the callers leave
            )
            for r in readers
            for g in r.reach.gates
        )
        if not readers or caller or any(r.reach.unresolved for r in readers):
            return "likely"
        return "proven"

    def readers(self, reads: list[ReadSite], every: bool = False) -> list[ReaderResult]:
        """Each read's conditions; once one read is active the flag is, and the rest wait
        (``every``: a flag that is set, whose every read is looked at, up to a bound)."""
        out: list[ReaderResult] = []
        for read in sorted(reads, key=lambda r: (not r.strict, len(r.gates))):
            result = self.reader(read)
            out.append(result)
            if result.reach.value is True and (not every or len(out) >= _CLOSE_READERS):
                break
        return out

    def reader(self, read: ReadSite) -> ReaderResult:
        reach = self.evaluator.read_reach(read)
        if reach.value is not False and read.handed is not None:
            # handed to a function: the flag matters where that function uses it
            used = handed_reach(self.evaluator, read) or outside_reach(self.evaluator, read)
            if used is not None:
                value: bool | None = reach.value  # the library's condition holds: as it was
                if used.value is not True:
                    value = False if used.value is False else (None if reach.value else reach.value)
                reach = Reach(value, [*reach.gates, *used.gates], reach.unresolved)
        return ReaderResult(
            read.site,
            read.form,
            read.text,
            read.strict,
            reach,
            function=read.scope.function,
            use=read.use,
        )

    def overrides(self, field_name: str) -> list[OverrideResult]:
        out: list[OverrideResult] = []
        walked: set[Site] = set()
        for change in self.resolution.changes:
            if change.flag != field_name:
                continue
            walked.add(change.site)
            out.append(from_change(change))
        for store in self.index.stores.get(field_name, []):
            if store.site in walked:
                continue
            gates = [self.evaluator.gate(g, store.scope) for g in store.gates]
            value = None if not gates else _conj(gates)
            kind = "static" if store.handling else "runtime"
            if store.handling:
                value = False if any(g.value is False for g in gates) else None
            out.append(
                OverrideResult(
                    store.site,
                    store.value_text,
                    [g.describe() for g in gates],
                    store.warning,
                    value,
                    kind,
                )
            )
        return out

    def coupled(self, field_name: str) -> list[OverrideResult]:
        """What the engine sets because of this flag (``--x disables piecewise CUDA graph``)."""
        out: list[OverrideResult] = []
        seen: set[Site] = set()
        for change in self._changes_reading.get(field_name, []):
            if change.flag != field_name:
                seen.add(change.site)
                result = from_change(change)
                result.value = f"--{self._name(change.flag)} = {result.value}"
                result.target = change.flag
                out.append(result)
        for store in self.couplings.get(field_name, []):
            if store.site in seen:
                continue
            gates = [self.evaluator.gate(g, store.scope) for g in store.gates]
            value: bool | None = False if any(g.value is False for g in gates) else None
            out.append(
                OverrideResult(
                    store.site,
                    f"--{self._name(store.flag)} = {store.value_text}",
                    [g.describe() for g in gates],
                    store.warning,
                    value,
                    "static",
                    store.flag,
                )
            )
        return out

    def _name(self, field_name: str) -> str:
        definition = self.index.definitions.get(field_name)
        return definition.name if definition else field_name.replace("_", "-")

    # -- the verdict ---------------------------------------------------------------------------

    def decide(self, report: FlagReport, runtime: list[ReadSite]) -> None:
        name = f"--{report.flag}"
        if report.refusals:
            refusal = report.refusals[0]
            report.verdict = "incompatible"
            report.reason = f"the engine refuses it here: {refusal.message!r} ({refusal.site})"
            report.evidence.append(Evidence(str(refusal.site), refusal.message))
            return
        translated = [
            c for c in report.couplings if c.kind == "resolution" and c.applies is True and c.target
        ]
        switched_off = report.resolved in (None, False) or _matches(
            report.resolved, self.evaluator.interp.defaults.get(report.field)
        )
        if (
            report.is_given
            and translated
            and switched_off
            and not _matches(report.given, report.resolved)
        ):
            # A spelling the engine turns into another flag (a deprecated alias): what the
            # other flag does here is what this one does.
            self._translated(report, translated[0])
            return
        if report.is_given and not _matches(report.given, report.resolved):
            changes = [o for o in report.overrides if o.kind == "resolution"]
            last = changes[-1] if changes else None
            if isinstance(report.resolved, Unknown):
                report.verdict = "conditional"
                report.conditions = [c for o in changes for c in o.conditions if "unknown" in c]
                report.reason = f"the engine may replace {name}={show(report.given)}" + (
                    f" at {last.site} when {'; '.join(report.conditions)}" if last else ""
                )
            else:
                report.verdict = "overridden"
                report.reason = f"the engine sets {name} to {show(report.resolved)}" + (
                    f" at {last.site}" + (f": {last.warning!r}" if last.warning else "")
                    if last
                    else ""
                )
            for override in changes:
                report.evidence.append(Evidence(str(override.site), override_text(override)))
            return
        live_couplings = [c for c in report.couplings if c.applies is not False]
        if not runtime:
            if report.definition.site is None:
                elsewhere = [
                    s
                    for s in self.index.mentions.get(report.field, [])
                    if not self.index.access.in_arg_layer(s.path)
                ]
                if report.definition.deprecated and not elsewhere:
                    # A deprecated spelling registered with an action of its own and no field:
                    # the action warns and stores nothing, and no code outside the argument
                    # layer names it (the action's body itself is not walked: ``likely``).
                    report.verdict = "dead-code"
                    report.confidence = "likely"
                    report.reason = (
                        f"{name} is registered without a field of the server arguments "
                        f"({report.definition.deprecated}), and nothing outside the argument "
                        "layer names it"
                    )
                    return
                report.verdict = "unknown"
                report.reason = (
                    f"{name} is not a field of the server arguments: the launcher handles it"
                )
                return
            if report.couplings:
                self._via_couplings(report, live_couplings)
                return
            consumed = self._consumed(report.field)
            mentions = [
                s
                for s in self.index.mentions.get(report.field, [])
                if not self.index.access.in_arg_layer(s.path)
            ]
            if consumed and self._consumed_off(report, name, consumed):
                return
            if consumed and self._built_into(report, name, consumed):
                return
            if consumed:
                report.verdict = "unknown"
                report.reason = (
                    f"{name} is read only by the argument resolution, at {consumed[0].site} "
                    f"({consumed[0].text}); what it does there is not followed"
                )
                report.evidence.append(Evidence(str(consumed[0].site), consumed[0].text))
                return
            if mentions:
                report.verdict = "unknown"
                report.reason = (
                    f"no direct read of {name}; its name is used as a string at {mentions[0]}"
                )
                report.evidence.append(Evidence(str(mentions[0]), "the flag's name as a string"))
                return
            checks = [r for r in self.index.reads.get(report.field, []) if r.handling]
            report.verdict = "dead-code"
            report.reason = f"{name} is defined but nothing outside the argument layer reads it" + (
                f" (only checked, at {checks[0].site})" if checks else ""
            )
            return
        self._from_readers(report)

    def _consumed_off(self, report: FlagReport, name: str, consumed: list[ReadSite]) -> bool:
        """Read only by the argument resolution, where every read that does something with the
        value (not one handing it on to a config field of its name, ``x=self.x``) sits behind a
        condition that does not hold here (vLLM's ``if self.cache_config.kv_offloading_size is
        None: return``): no-op, ``likely`` (what runs under a false condition is not walked).
        Says so in ``report``; False where one may run."""
        using = [r for r in consumed if not _HANDED_ON.match(r.text)]
        if not using:
            return False
        reaches = [self.evaluator.read_reach(r) for r in using]
        if any(reach.value is not False for reach in reaches):
            return False
        blocking = [g for reach in reaches for g in reach.deciding()]
        report.verdict = "no-op"
        report.confidence = "likely"
        report.conditions = [g.text for g in blocking][:8]
        report.reason = (
            f"{name} is read only by the argument resolution, at {using[0].site}, "
            f"where {blocking[0].describe() if blocking else 'its conditions do not hold'}"
        )
        for read in using[:4]:
            report.evidence.append(Evidence(str(read.site), read.text))
        return True

    def _consumed(self, field_name: str) -> list[ReadSite]:
        """The argument resolution's reads that use the flag's value (not a check of it)."""
        return [r for r in self.index.reads.get(field_name, []) if r.handling and r.use == "value"]

    def _built_from(self, read: ReadSite, field_name: str) -> StoreSite | None:
        """The one other flag the resolution function making ``read`` builds (``declare_resolution
        (..., cuda_graph_config=config)``), if exactly one."""
        built = {
            store.flag: store
            for store in self.evaluator.stores.by_function().get(
                (read.site.path, read.scope.function), []
            )
            if store.flag != field_name and _WORD.fullmatch(store.value_text.strip())
        }
        return next(iter(built.values())) if len(built) == 1 else None

    def _handed_on_while_reads_are_off(self, report: FlagReport, name: str) -> bool:
        """Every run-time read is off here, but the argument resolution builds another flag from
        this one (0.5.23's ``--cuda-graph-bs-decode`` into ``cuda_graph_config``, whose readers
        capture the graphs; its own direct reads are the draft worker's): judged as that flag is
        (``_built_into``), else ``unknown``; never ``no-op`` on the direct reads alone."""
        consumed = self._consumed(report.field)
        if self._built_into(report, name, consumed):
            return True
        for read in consumed:
            store = self._built_from(read, report.field)
            if store is None or self.evaluator.read_reach(read).value is False:
                continue
            report.verdict = "unknown"
            report.reason = (
                f"every run-time read of {name} is off here, but the argument resolution builds "
                f"--{store.flag.replace('_', '-')} from it at {read.site} ({read.text}); what "
                "that does is not followed"
            )
            report.evidence.append(Evidence(str(read.site), read.text))
            report.evidence.append(Evidence(str(store.site), store.text))
            return True
        return False

    def _built_into(self, report: FlagReport, name: str, consumed: list[ReadSite]) -> bool:
        """Read by a resolution function that builds an object and declares it as another flag
        (SGLang 0.5.23's ``parse_cuda_graph_config``: ``_set(Phase.PREFILL, "max_bs",
        cfg.cuda_graph_max_bs_prefill)`` into ``config``, then ``declare_resolution(...,
        cuda_graph_config=config)``), with the read's conditions holding here: the value goes
        where that flag goes, so the flag is judged as that one is, ``likely`` at best (which
        part of the object it sets is not followed). Says so in ``report``; False otherwise."""
        for read in consumed:
            store = self._built_from(read, report.field)
            if store is None or self.evaluator.read_reach(read).value is not True:
                continue
            inner = self.report(store.flag, depth=1) if self._depth == 0 else None
            if inner is None or inner.verdict == "unknown":
                continue
            report.verdict = inner.verdict
            report.confidence = "unknown" if inner.confidence == "unknown" else "likely"
            report.conditions = inner.conditions
            report.reason = (
                f"{name} is read by the argument resolution at {read.site} ({read.text}), which "
                f"builds --{store.flag.replace('_', '-')} from it ({store.site}); "
                f"--{inner.flag}: {inner.reason}"
            )
            report.evidence.append(Evidence(str(read.site), read.text))
            report.evidence.append(Evidence(str(store.site), store.text))
            report.evidence.extend(e for e in inner.evidence if e not in report.evidence)
            return True
        return False

    def _translated(self, report: FlagReport, coupling: OverrideResult) -> None:
        assert coupling.target is not None
        inner = self.report(coupling.target, depth=1) if self._depth == 0 else None
        report.evidence.append(Evidence(str(coupling.site), override_text(coupling)))
        if inner is None:
            report.verdict = "effective"
            report.reason = (
                f"the engine turns --{report.flag} into {coupling.value} ({coupling.site})"
            )
            return
        report.verdict = inner.verdict
        report.confidence = inner.confidence
        report.conditions = inner.conditions
        report.reason = (
            f"the engine turns --{report.flag} into {coupling.value} ({coupling.site}); "
            f"--{inner.flag}: {inner.reason}"
        )
        report.readers = inner.readers
        report.evidence.extend(e for e in inner.evidence if e not in report.evidence)

    def _via_couplings(self, report: FlagReport, live: list[OverrideResult]) -> None:
        name = f"--{report.flag}"
        for coupling in report.couplings:
            report.evidence.append(Evidence(str(coupling.site), override_text(coupling)))
        if not live:
            consumed = self._consumed_beyond_couplings(report)
            if consumed is not None:
                # read where the resolution does more than set flags (a write through a local
                # helper into a derived config, say): what that does is not followed
                report.verdict = "unknown"
                report.reason = (
                    f"{name} is read by the argument resolution at {consumed.site} "
                    f"({consumed.text}), which does more there than set flags; not followed"
                )
                report.evidence.append(Evidence(str(consumed.site), consumed.text))
                return
            report.verdict = "no-op"
            report.reason = (
                f"{name} is only read to set other flags, and none of those settings applies here"
            )
            return
        applied = [c for c in live if c.applies is True]
        report.verdict = "effective" if applied else "conditional"
        chosen = (applied or live)[0]
        report.reason = f"{name} is read only by the argument resolution, which then sets {chosen.value} ({chosen.site})"
        if not applied:
            report.conditions = [c for c in chosen.conditions if "unknown" in c]

    def _consumed_beyond_couplings(self, report: FlagReport) -> ReadSite | None:
        """A read by the argument layer used as a value (not a check, not only to set flags)
        whose function sets none of the flags coupled to it."""
        coupled = {c.site for c in report.couplings}
        stores_in = self.evaluator.stores.by_function().items()
        setting = {where for where, stores in stores_in if any(s.site in coupled for s in stores)}
        for read in self.index.reads.get(report.field, []):
            where = (read.site.path, read.scope.function)
            if read.handling and read.use == "value" and where not in setting:
                return read
        return None

    def _probe(self, report: FlagReport, runtime: list[ReadSite]) -> None:
        """For a flag that is set, walk the functions that read it: one that raises on this
        target whatever its arguments refuses the setting when it runs."""
        by_site = {r.site: r for r in runtime}
        for reader in report.readers[:_PROBED_READERS]:
            read = by_site.get(reader.site)
            if reader.reach.value is not False and read is not None:
                reader.raises = self.evaluator.probe(read)

    def _from_readers(self, report: FlagReport) -> None:
        name = f"--{report.flag}"
        readers = report.readers
        raising = [r for r in readers if r.raises is not None and r.reach.value is not False]
        if raising:
            _refused_by_reader(report, name, raising[0])
            return
        for reader in readers[:8]:
            report.evidence.append(Evidence(str(reader.site), reader_text(reader)))
        for coupling in report.couplings[:4]:
            report.evidence.append(Evidence(str(coupling.site), override_text(coupling)))
        active = [r for r in readers if r.reach.value is True]
        followed = [r for r in active if not _assumed(r.reach)]
        decisive = [r for r in followed if r.use not in ("limit", "copy", "check")]
        if followed and not decisive and _only_a_limit(report, name, readers):
            return
        if followed and not decisive and _kept_unused(report.field, followed, readers):
            # kept on the object under the flag's own name, and no use of that attribute is
            # known to hold here: keeping a value runs nothing (the uses decide, as below)
            readers = [r for r in readers if r not in followed]
            active, followed = [r for r in active if r not in followed], []
        if followed:
            first = (decisive or followed)[0]
            report.verdict = "effective"
            report.reason = (
                f"{name} is read at {first.site} and every condition on that read holds here"
            )
            return
        if active:
            # Every active read hangs on a call this analysis did not see (a table, a registry,
            # a name defined many times): such reads sit mostly in backends, kernels and layers
            # only some models or settings build, and on flags read by hand "effective" was
            # then wrong four times in five (docs/research.md). Say what is not known instead.
            first = active[0]
            assumed = [u for u in first.reach.unresolved if is_assumed_note(u)]
            report.verdict = "conditional"
            report.path_assumed = True
            report.conditions = [f"{u.split(':')[0]} runs here" for u in assumed][:8]
            report.reason = (
                f"{name} is read at {first.site}, whose conditions hold here, but only if "
                + "; ".join(report.conditions[:3])
                + f" (not followed: {assumed[0].split(': ', 1)[-1]})"
            )
            report.evidence.append(Evidence(str(first.site), reader_text(first)))
            return
        undecided = [r for r in readers if r.reach.value is None]
        if undecided:
            conditions: list[str] = []
            for reader in undecided:
                for gate in reader.reach.deciding():
                    if gate.text not in conditions:
                        conditions.append(gate.text)
            report.verdict = "conditional"
            report.conditions = conditions[:8]
            report.reason = f"{name} is read at {undecided[0].site} when " + "; ".join(
                conditions[:4]
            )
            holding = [
                g.describe()
                for g in undecided[0].reach.gates
                if g.value is True and any(f.kind in (HARDWARE, MODEL, PARALLEL) for f in g.facts)
            ]
            if holding:
                report.reason += "; holds here: " + "; ".join(holding[:3])
            return
        if self._handed_on_while_reads_are_off(report, name):
            return
        facts: set[Fact] = set()
        blocking: list[GateEval] = []
        each: list[set[str]] = []  # per read, the kinds of what turns it off
        for reader in readers:
            own = {f for gate in reader.reach.deciding() for f in gate.facts}
            if any(f.kind == FLAG for f in own):
                # "an NVIDIA GPU" holds on every CUDA target: beside a flag, the flag decides
                # (an environment variable does not: AMD's switches are read so, beside the
                # vendor)
                own = {f for f in own if not (f.kind == HARDWARE and f.name == "vendor")}
            facts |= own
            each.append({f.kind for f in own})
            blocking.extend(reader.reach.deciding())
        kinds = set().union(*each) if each else set()
        texts = []
        for gate in blocking:
            if gate.text not in texts:
                texts.append(gate.text)
        # a parameter no caller that runs here passes: the model's code decides, as the model does
        here = {HARDWARE, MODEL, PARALLEL, CALLERS}
        if not kinds & {*here, FLAG, ENV}:
            report.verdict = "conditional"
            report.reason = (
                f"every read of {name} is behind a condition that fails with the values the source gives, but not for a reason this analysis can name: "
                + "; ".join(texts[:3])
            )
        elif kinds & here and not (
            kinds & {FLAG, ENV} and any(k & {FLAG, ENV} and not k & here for k in each)
        ):
            # a read another flag turns off (the model aside) makes it a no-op, not the model
            report.verdict = "not-activated"
            basis = sorted({f.text for f in facts if f.kind in here})
            report.reason = (
                f"every read of {name} is behind a condition that fails here ({'; '.join(basis)}): "
                + "; ".join(texts[:3])
            )
        else:
            report.verdict = "no-op"
            basis = sorted({f.text for f in facts if f.kind in (FLAG, ENV)})
            report.reason = (
                f"every read of {name} is behind a condition that other flags turn off ({'; '.join(basis[:4])}): "
                + "; ".join(texts[:3])
            )
        report.conditions = texts[:8]


#: ``kv_offloading_backend=self.kv_offloading_backend,``: a value handed on to a config's
#: field of the same name (its reads are the flag's reads), no use of its own
_HANDED_ON = re.compile(r"^\s*(\w+)\s*=\s*(?:self|args|engine_args)\.\1\s*,?\s*\)?\s*$")


def _kept_unused(
    field_name: str, followed: list[ReaderResult], readers: list[ReaderResult]
) -> bool:
    """Every read that holds here keeps the value on an object under the flag's own name
    (``self.default_priority_value = get_schedule().default_priority_value``), and the uses of
    that attribute decide: those read in the copies' files, where none holds for sure (``if
    self.allow_auto_truncate:`` behind a prompt's length is per request); where no such use is
    among the reads, every other read is off here."""
    if not all(r.use == "copy" and re.match(rf"self\.{field_name}\s*=", r.text) for r in followed):
        return False
    files = {r.site.path for r in followed}
    uses = [r for r in readers if r not in followed and r.site.path in files]
    if uses:
        return all(r.reach.value is not True for r in uses)
    others = [r for r in readers if r not in followed]
    return bool(others) and all(r.reach.value is False for r in others)


def _only_a_limit(report: FlagReport, name: str, readers: list[ReaderResult]) -> bool:
    """Read only as a bound on a count made while serving (a queue's length), perhaps behind
    the check that it is set (``x is None or n <= x``): it changes what runs only when the load
    reaches it. Says so in ``report``; False where no such read is reached."""
    limits = [r for r in readers if r.use == "limit" and r.reach.value is not False]
    if not limits:
        return False
    first = limits[0]
    report.verdict = "conditional"
    report.conditions = [f"the run-time value compared with it reaches it ({first.text})"]
    report.reason = (
        f"{name} is read at {first.site} only as a limit on a run-time value "
        f"({first.text}): it changes what runs when the load reaches it"
    )
    report.evidence.append(Evidence(str(first.site), reader_text(first)))
    return True


def _refused_by_reader(report: FlagReport, name: str, first: ReaderResult) -> None:
    """The verdict of a reading function that raises here with the flag as given."""
    assert first.raises is not None
    # a raise on a path taken through a name defined many times is kept as the start's: the
    # kernel warm-up (``warmup()``, six definitions) refuses FlashInfer's all-reduce fusion on
    # sm120, as the seeds' campaign met; a weight-update request reached the same way is a
    # wrong ``incompatible`` (docs/research.md, the eighth round: tried and not kept)
    report.verdict = "incompatible" if first.reach.value is True else "conditional"
    report.reason = (
        f"{name} is read at {first.site}"
        + (f" by {first.function}()" if first.function != "<module>" else "")
        + ", which raises here: "
        f"{first.raises.message!r} ({first.raises.site})"
    )
    if first.reach.value is None:
        report.conditions = [g.text for g in first.reach.deciding()][:8]
        report.reason += " when " + "; ".join(report.conditions[:4])
    report.evidence.append(Evidence(str(first.site), reader_text(first)))
    report.evidence.append(Evidence(str(first.raises.site), f"raises {first.raises.message!r}"))


def _assumed(reach: Reach) -> bool:
    return any(is_assumed_note(u) for u in reach.unresolved)


def _conj(gates: list[GateEval]) -> bool | None:
    if any(g.value is False for g in gates):
        return False
    if any(g.value is None for g in gates):
        return None
    return True


def _matches(given: Any, resolved: Any) -> bool:
    if isinstance(resolved, Unknown):
        return False
    try:
        return bool(given == resolved) or (
            isinstance(given, list | tuple) and list(given) == list(resolved)
        )
    except Exception:
        return False
