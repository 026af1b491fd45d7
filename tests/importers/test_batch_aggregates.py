"""A served log keeps the first ``BATCH_LINES_KEPT`` batch lines of each kind whole and what the
findings read of all of them beside (docs/reliability.md, "Server log import speed and memory"):
the decode-eager finding and the spec trial count every line, past the kept ones too."""

from __future__ import annotations

from pathlib import Path

from ledger.engines.failure import IGNORED_KEPT
from ledger.engines.sglang_facts import BATCH_LINES_KEPT
from ledger.engines.sglang_log import parse_server_log
from ledger.importers import import_file
from schemas import SpecDecodingTrialCompleted

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
STARTUP = FIXTURES / "sglang" / "server" / "sm120_qwen35_baseline.log"
STEPS = 1300  # two decode lines and a prefill line a step: past the kept lines of each kind


def served_log(steps: int = STEPS) -> list[str]:
    """A real startup (captured batch sizes up to 48), then per step a prefill line, a decode line
    with an accept length under CUDA graph and, every fifth step, one without it at a
    ``#running-req`` above 48 (the last one at a time of its own)."""
    lines = [
        line
        for line in STARTUP.read_text(encoding="utf-8").splitlines()
        if "Decode batch" not in line and "Prefill batch" not in line
    ]
    for step in range(steps):
        stamp = f"2026-11-20 15:{step // 60 % 60:02d}:{step % 60:02d}"
        lines.append(f"[{stamp} TP0] Prefill batch, #new-seq: 1, #new-token: {step}, #queue-req: 0")
        lines.append(
            f"[{stamp} TP0] Decode batch, #running-req: {1 + step % 40}, "
            f"accept len: {1.25 + step % 7 / 4:.2f}, cuda graph: True, #queue-req: 0"
        )
        if step % 5 == 4:
            lines.append(
                f"[{stamp} TP1] Decode batch, #running-req: {49 + step % 100}, "
                f"cuda graph: False, #queue-req: 0"
            )
    return lines


def test_the_batch_lines_past_the_kept_ones_are_still_counted() -> None:
    facts = parse_server_log(served_log(), strict=True)
    assert len(facts.decode_batches) == len(facts.prefill_batches) == BATCH_LINES_KEPT
    assert facts.eager_decodes.count == STEPS // 5
    assert len(facts.accept_series) == STEPS
    assert facts.accept_lengths == [1.25 + step % 7 / 4 for step in range(STEPS)]
    assert facts.first_accept_line is not None and facts.last_accept_stamped is not None
    assert facts.last_accept_stamped.message.startswith("Decode batch, #running-req: 20,")


def test_the_findings_and_the_spec_trial_read_every_batch_line(tmp_path: Path) -> None:
    log = tmp_path / "served.log"
    lines = served_log()
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    events = import_file(log).events
    eager = next(e for e in events if getattr(e, "kind", None) == "decode-without-cuda-graph")
    peak = max(49 + step % 100 for step in range(STEPS) if step % 5 == 4)
    assert eager.message.startswith(f"{STEPS // 5} decode batch line(s) ran without CUDA graph")
    assert f"up to {peak}," in eager.message
    first_eager = next(n for n, line in enumerate(lines, 1) if "cuda graph: False" in line)
    assert [e.ref for e in eager.evidence][1] == f"served.log:{first_eager}"
    trial = next(e for e in events if isinstance(e, SpecDecodingTrialCompleted))
    assert trial.notes.startswith(f"accept length read from {STEPS} log line(s)")
    first_accept = next(n for n, line in enumerate(lines, 1) if "accept len" in line)
    assert trial.source == f"served.log:{first_accept}"
    assert len(trial.accept_length_series) == 1000
    assert trial.occurred_at is not None and trial.occurred_at.strftime("%H:%M:%S") == "15:21:39"


ODD = (
    "Decode batch, #running-req: 70, cuda graph:  False, #queue-req: 0",
    "Decode batch. #running-req: 71, cuda graph: False,",
    "Decode batch, #running-req: 72, #queue-req: 0, accept len: 2.50",
    "Decode batch, #running-req: 73, accept len: 3, cuda graph: False",
    "Decode batch, #running-req: 74, cuda graph: True, #queue-req: 0",
    "Decode batch, #running-req: 75, note: False",
)


def test_a_decode_line_past_the_kept_ones_is_read_as_one_before_them() -> None:
    """Past the kept lines a decode line is parsed only when it may hold ``cuda graph: False`` or
    an accept length: the same lines give the same aggregates before the kept ones and after."""
    plain = [f"[2026-11-20 15:00:00 TP0] Decode batch, #running-req: {n % 9}" for n in range(1100)]
    odd = [f"[2026-11-20 15:00:00 TP0] {text}" for text in ODD]
    before = parse_server_log(odd + plain, strict=True)
    after = parse_server_log(plain + odd, strict=True)
    assert after.eager_decodes.count == before.eager_decodes.count == 3
    assert [value for value, _ in after.eager_decodes.kept()] == [70, 71, 73]
    assert [value for value, _ in after.eager_decodes.kept()] == [
        value for value, _ in before.eager_decodes.kept()
    ]
    assert list(after.accept_series) == list(before.accept_series) == [2.5, 3.0]


def test_the_outcome_keeps_the_first_lines_about_one_request() -> None:
    """Each batch line names ``#running-req``: the outcome keeps the first ``IGNORED_KEPT`` such
    lines (whether there is one is what is read), not one per batch line."""
    facts = parse_server_log(served_log(), strict=True)
    assert len(facts.outcome.ignored) == IGNORED_KEPT and facts.outcome.state == "ready"
    assert facts.outcome.ignored[0][0].message.startswith(
        "Prefill batch, #new-seq: 1, #new-token: 0,"
    )
