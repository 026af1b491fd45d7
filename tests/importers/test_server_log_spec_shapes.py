"""A served log of speculative decoding (SGLang's decode lines with ``accept len``, some logged
with ``cuda graph: False``; vLLM's ``SpecDecoding metrics`` lines) imported as a stream, its bulk
lines taken in runs by their shape (docs/reliability.md, "Server log import speed and memory"):
the spec trial and the eager-decode finding read every such line, and the events are those of
the log read whole (line by line)."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from pathlib import Path
from statistics import fmean

import pytest

from ledger.engines import bulk_lines, vllm_facts
from ledger.importers import detect, import_file
from ledger.input_files import BulkRun

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
STARTUP = FIXTURES / "sglang" / "server" / "sm120_qwen35_baseline.log"  # graphs up to bs 48
VLLM_STARTUP = FIXTURES / "vllm_cpu" / "spec-start.log"
VLLM_STARTUP_LINES = 130  # up to its first served lines
ACCEPT = (1.75, 2.5, 3.25, 3.5)


def _write_sglang(path: Path, size: int) -> None:
    """A real startup, then four ranks' prefill and decode lines (an accept length and rate
    each; above 48 running requests without CUDA graph, up to 64, and 70 once near the end) and
    uvicorn's access lines until ``size`` bytes."""
    head = [
        line
        for line in STARTUP.read_text(encoding="utf-8").splitlines(keepends=True)
        if "Decode batch" not in line and "Prefill batch" not in line
    ]
    clock = datetime(2026, 11, 20, 14, 10, 0)
    with path.open("w", encoding="utf-8") as out:
        out.writelines(head)
        step = 0
        while out.tell() < size:
            stamp = clock.strftime("%Y-%m-%d %H:%M:%S")
            block = []
            for rank in range(4):
                running = 1 + (step * 7 + rank) % 64
                accept = ACCEPT[(step + rank) % 4]
                block.append(
                    f"[{stamp} TP{rank}] Prefill batch, #new-seq: 1, #new-token: {128 + step % 900}, "
                    f"#cached-token: {step % 512}, token usage: 0.{step % 90:02d}, "
                    f"#running-req: {running}, #queue-req: {step % 3}\n"
                )
                block.append(
                    f"[{stamp} TP{rank}] Decode batch, #running-req: {running}, #token: "
                    f"{running * 1100}, token usage: 0.{(step + rank) % 90:02d}, accept len: "
                    f"{accept:.2f}, accept rate: {accept / 4:.2f}, cuda graph: {running <= 48}, "
                    f"gen throughput (token/s): {100 + step % 3000}.{rank}1, #queue-req: 0\n"
                )
            block.append(
                f'[{stamp}] INFO:     127.0.0.1:{40000 + step % 20000} - "POST /generate HTTP/1.1" 200 OK\n'
            )
            out.write("".join(block))
            step += 1
            clock += timedelta(milliseconds=250)
        stamp = clock.strftime("%Y-%m-%d %H:%M:%S")
        out.write(
            f"[{stamp} TP3] Decode batch, #running-req: 70, #token: 77000, token usage: 0.50, "
            f"accept len: 2.00, accept rate: 0.50, cuda graph: False, gen throughput (token/s): "
            f"99.00, #queue-req: 4\n"
            f'[{stamp}] INFO:     127.0.0.1:40001 - "POST /generate HTTP/1.1" 200 OK\n'
        )


def _counting(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How many lines each engine's runs took (the runs' shortcut counted)."""
    taken = {"sglang": 0, "vllm": 0}
    sglang_run, vllm_run = bulk_lines.SglangBulk.take_run, bulk_lines.vllm_take_run

    def sglang(self: bulk_lines.SglangBulk, number: int, run: BulkRun, facts: object) -> int:
        got = sglang_run(self, number, run, facts)
        taken["sglang"] += got
        return got

    def vllm(bulk: bulk_lines.VllmBulk, number: int, run: BulkRun, facts: object) -> int:
        got = vllm_run(bulk, number, run, facts)
        taken["vllm"] += got
        return got

    monkeypatch.setattr(bulk_lines.SglangBulk, "take_run", sglang)
    monkeypatch.setattr(vllm_facts, "vllm_take_run", vllm)
    return taken


def test_a_speculative_sglang_log_with_eager_decodes_read_in_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "spec.log"
    _write_sglang(log, 5_000_000)
    lines = log.read_text(encoding="utf-8").splitlines()
    decodes = [(n, x) for n, x in enumerate(lines, 1) if "] Decode batch" in x]
    accepts = [float(re.search(r"accept len: ([\d.]+)", x).group(1)) for _, x in decodes]
    eager = [(n, x) for n, x in decodes if "cuda graph: False" in x]
    whole = import_file(log)
    taken = _counting(monkeypatch)
    monkeypatch.setattr(detect, "STREAM_FROM", 1 << 20)
    streamed = import_file(log)
    assert detect.read_input(log).streamed
    assert taken["sglang"] > 0.75 * len(lines)  # all but the head and the kept ones
    assert [e.model_dump(mode="json") for e in streamed.events] == [
        e.model_dump(mode="json") for e in whole.events
    ]
    (trial,) = [e for e in streamed.events if e.type == "spec_decoding_trial_completed"]
    assert trial.notes.startswith(f"accept length read from {len(decodes)} log line(s)")
    assert trial.accept_length == round(fmean(accepts), 4)
    assert trial.accept_length_series == accepts[:1000]
    assert trial.source == f"spec.log:{decodes[0][0]}"
    assert trial.occurred_at == datetime.fromisoformat(decodes[-1][1][1:20] + "+00:00")
    (finding,) = [
        e for e in streamed.events if getattr(e, "kind", None) == "decode-without-cuda-graph"
    ]
    assert finding.message.startswith(
        f"{len(eager)} decode batch line(s) ran without CUDA graph at #running-req up to 70, "
        f"above the largest captured batch size 48"
    )
    assert [x.ref for x in finding.evidence[1:]] == [f"spec.log:{n}" for n, _ in eager[:3]]


def _write_vllm(path: Path, steps: int) -> list[float]:
    """A real vLLM start with a speculative config, then ``steps`` of its API server's access
    lines, throughput line and ``SpecDecoding metrics`` line; the accept lengths in order."""
    head = VLLM_STARTUP.read_text(encoding="utf-8").splitlines(keepends=True)
    out = head[:VLLM_STARTUP_LINES]
    clock, accepts, tag = datetime(2026, 12, 1, 14, 50, 0), [], "(APIServer pid=4848)"
    for step in range(steps):
        stamp = clock.strftime("%m-%d %H:%M:%S")
        out.extend(
            f'{tag} INFO:     127.0.0.1:{40000 + (step * 8 + i) % 20000} - "POST /v1/completions '
            f'HTTP/1.1" 200 OK\n'
            for i in range(8)
        )
        accepts.append(ACCEPT[step % 4] + step % 3 / 100)
        out.append(
            f"{tag} INFO {stamp} [loggers.py:335] Engine 000: Avg prompt throughput: {step % 900}.5 "
            f"tokens/s, Avg generation throughput: {100 + step % 3000}.0 tokens/s, Running: "
            f"{step % 64} reqs, Waiting: 0 reqs, CPU KV cache usage: {step % 90}.0%, Prefix cache "
            f"hit rate: 0.0%\n"
            f"{tag} INFO {stamp} [metrics.py:120] SpecDecoding metrics: Mean acceptance length: "
            f"{accepts[-1]:.2f}, Accepted throughput: 18.00 tokens/s, Drafted throughput: 19.69 "
            f"tokens/s, Accepted: 180 tokens, Drafted: 197 tokens, Per-position acceptance rate: "
            f"0.935, 0.727, 0.675, Avg Draft acceptance rate: 91.4%\n"
        )
        clock += timedelta(seconds=10)
    path.write_text("".join(out), encoding="utf-8")
    return accepts


def test_a_speculative_vllm_log_read_in_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "spec.log"
    accepts = _write_vllm(log, 12_000)
    lines = log.read_text(encoding="utf-8").splitlines()
    metrics = [n for n, x in enumerate(lines, 1) if "SpecDecoding metrics" in x]
    whole = import_file(log)
    taken = _counting(monkeypatch)
    monkeypatch.setattr(detect, "STREAM_FROM", 1 << 20)
    streamed = import_file(log)
    assert detect.read_input(log).streamed
    assert taken["vllm"] > 0.9 * len(lines)
    assert [e.model_dump(mode="json") for e in streamed.events] == [
        e.model_dump(mode="json") for e in whole.events
    ]
    (trial,) = [e for e in streamed.events if e.type == "spec_decoding_trial_completed"]
    assert trial.notes.startswith(f"accept length read from {len(metrics)} log line(s)")
    assert len(metrics) == len(accepts)
    assert trial.accept_length == round(fmean(accepts), 4)
    assert trial.accept_length_series == accepts[:1000]
    assert trial.source == f"spec.log:{metrics[0]}"
