"""Benchmark ``tuneledger import SERVER.log``: throughput (MB/s) and the importing process's
peak RSS on a large generated SGLang log.

The log is a real startup (``tests/fixtures/sglang/server/sm120_qwen35_baseline.log``: server
args, memory pool, CUDA graphs, the ready line) followed by what makes a served log big:
``Prefill batch`` / ``Decode batch`` statistics of four ranks and uvicorn's access lines, with
advancing timestamps, until the file reaches ``--mb``. Numbers from this script go in
docs/reliability.md; they are not tests. Run::

    .venv/bin/python bench/bench_log_import.py --mb 20 [--mb 100] [--engine vllm] [--json OUT]

``--engine vllm``: a real vLLM 0.32 startup (``tests/fixtures/vllm_cpu/good-start.log``), then
its API server's access lines and ``Avg prompt throughput`` lines.

``--shape``: what the bulk lines look like. ``served`` (the default): as above. ``spec``:
speculative decoding's (EAGLE/NEXTN): SGLang's decode lines carry ``accept len: X, accept rate:
Y``; vLLM's start is a speculative one (``vllm_cpu/spec-start.log``) and each throughput line is
followed by a ``SpecDecoding metrics`` line. ``eager`` (SGLang): a decode line at ``#running-req``
above the largest captured batch (48 in the startup) is logged with ``cuda graph: False``.
``spec-eager`` (SGLang): both, every decode line with an accept length, a quarter of them eager.

Each size is imported once into a fresh ledger by a child process under GNU time
(``/usr/bin/time -f '%e %U %S %M'``: wall seconds, user and system CPU seconds, peak RSS in
KiB). On a shared machine compare the CPU seconds: other processes' load stretches the wall time.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STARTUP = ROOT / "tests" / "fixtures" / "sglang" / "server" / "sm120_qwen35_baseline.log"


ACCEPT = (1.75, 2.5, 3.25, 3.5)


def write_log(path: Path, megabytes: float, shape: str = "served") -> int:
    """A served SGLang log of about ``megabytes`` MB at ``path`` (``shape``: see the module doc);
    its size in bytes."""
    head = [
        line
        for line in STARTUP.read_text(encoding="utf-8").splitlines()
        if "Decode batch" not in line and "Prefill batch" not in line
    ]
    target = int(megabytes * 1_000_000)
    clock = datetime(2026, 11, 20, 14, 10, 0)
    with path.open("w", encoding="utf-8") as out:
        out.write("\n".join(head) + "\n")
        size = out.tell()
        step = 0
        while size < target:
            block = []
            stamp = clock.strftime("%Y-%m-%d %H:%M:%S")
            for rank in range(4):
                running = 1 + (step * 7 + rank) % 64
                block.append(
                    f"[{stamp} TP{rank}] Prefill batch, #new-seq: 1, #new-token: {128 + step % 900}, "
                    f"#cached-token: {step % 512}, token usage: 0.{step % 90:02d}, "
                    f"#running-req: {running}, #queue-req: {step % 3}\n"
                )
                accept = ACCEPT[(step + rank) % 4]
                spec = (
                    f"accept len: {accept:.2f}, accept rate: {accept / 4:.2f}, "
                    if shape in ("spec", "spec-eager")
                    else ""
                )
                graph = shape not in ("eager", "spec-eager") or running <= 48
                block.append(
                    f"[{stamp} TP{rank}] Decode batch, #running-req: {running}, "
                    f"#token: {running * 1100}, token usage: 0.{(step + rank) % 90:02d}, "
                    f"{spec}cuda graph: {graph}, gen throughput (token/s): "
                    f"{100 + step % 3000}.{rank}1, #queue-req: 0\n"
                )
            block.append(
                f'[{stamp}] INFO:     127.0.0.1:{40000 + step % 20000} - "POST /generate HTTP/1.1" 200 OK\n'
            )
            text = "".join(block)
            out.write(text)
            size += len(text.encode())
            step += 1
            clock += timedelta(milliseconds=250)
    return path.stat().st_size


VLLM_STARTUP = ROOT / "tests" / "fixtures" / "vllm_cpu" / "good-start.log"
#: a real vLLM 0.32 start with a speculative config, up to its first served lines
VLLM_SPEC_STARTUP = ROOT / "tests" / "fixtures" / "vllm_cpu" / "spec-start.log"
VLLM_SPEC_STARTUP_LINES = 130


def write_vllm_log(path: Path, megabytes: float, shape: str = "served") -> int:
    """A served vLLM log of about ``megabytes`` MB at ``path`` (a real 0.32 CPU startup, then its
    API server's throughput lines every 10 s and its access lines; ``shape``: see the module
    doc); its size in bytes."""
    target = int(megabytes * 1_000_000)
    clock = datetime(2026, 12, 1, 14, 50 if shape == "spec" else 45, 0)
    tag = "(APIServer pid=4848)" if shape == "spec" else "(APIServer pid=21521)"
    with path.open("w", encoding="utf-8") as out:
        if shape == "spec":
            head = VLLM_SPEC_STARTUP.read_text(encoding="utf-8").splitlines(keepends=True)
            out.writelines(head[:VLLM_SPEC_STARTUP_LINES])
        else:
            out.write(VLLM_STARTUP.read_text(encoding="utf-8"))
        size = out.tell()
        step = 0
        while size < target:
            stamp = clock.strftime("%m-%d %H:%M:%S")
            block = [
                f'{tag} INFO:     127.0.0.1:{40000 + (step * 4 + i) % 20000} - "POST /v1/completions '
                f'HTTP/1.1" 200 OK\n'
                for i in range(8)
            ]
            if step % 4 == 0:
                block.append(
                    f"{tag} INFO {stamp} [loggers.py:257] Engine 000: Avg prompt throughput: "
                    f"{step % 900}.{step % 10} tokens/s, Avg generation throughput: "
                    f"{100 + step % 3000}.{step % 7} tokens/s, Running: {step % 64} reqs, "
                    f"Waiting: {step % 3} reqs, GPU KV cache usage: {step % 90}.{step % 10}%, "
                    f"Prefix cache hit rate: {step % 50}.0%\n"
                )
                if shape == "spec":
                    accepted = 150 + step % 50
                    block.append(
                        f"{tag} INFO {stamp} [metrics.py:120] SpecDecoding metrics: Mean "
                        f"acceptance length: {ACCEPT[step // 4 % 4]:.2f}, Accepted throughput: "
                        f"{accepted / 10:.2f} tokens/s, Drafted throughput: 19.69 tokens/s, "
                        f"Accepted: {accepted} tokens, Drafted: 197 tokens, Per-position "
                        f"acceptance rate: 0.935, 0.727, 0.{600 + step % 100}, Avg Draft "
                        f"acceptance rate: {accepted / 1.97:.1f}%\n"
                    )
            text = "".join(block)
            out.write(text)
            size += len(text.encode())
            step += 1
            clock += timedelta(seconds=2, milliseconds=500)
    return path.stat().st_size


def import_once(log: Path, ledger: Path) -> tuple[float, float, float, str]:
    """Wall seconds, CPU seconds, peak RSS (MiB) and the last output line of one import in a
    child process."""
    report = ledger.with_suffix(".time")
    done = subprocess.run(
        [
            "/usr/bin/time",
            "-f",
            "%e %U %S %M",
            "-o",
            str(report),
            sys.executable,
            "-m",
            "ledger.cli.main",
            "--ledger",
            str(ledger),
            "import",
            "--create",
            str(log),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"import of {log} failed ({done.returncode}): {done.stderr.strip()}")
    seconds, user, system, kib = report.read_text().split()[-4:]
    last = (done.stdout.strip().splitlines() or [""])[-1]
    return float(seconds), float(user) + float(system), int(kib) / 1024, last


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, action="append", help="log size(s) in MB (default 20)")
    parser.add_argument("--json", type=Path, help="write the figures here as JSON")
    parser.add_argument(
        "--engine", choices=("sglang", "vllm"), default="sglang", help="whose served log"
    )
    parser.add_argument(
        "--shape",
        choices=("served", "spec", "eager", "spec-eager"),
        default="served",
        help="the bulk lines' shape (eager, spec-eager: SGLang only)",
    )
    parser.add_argument("--keep", type=Path, help="also write the log here (compare it)")
    args = parser.parse_args()
    if args.shape in ("eager", "spec-eager") and args.engine == "vllm":
        parser.error(f"--shape {args.shape} is an SGLang shape")
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for megabytes in args.mb or [20.0]:
            log = Path(scratch) / f"server-{megabytes:g}mb.log"
            write = write_vllm_log if args.engine == "vllm" else write_log
            size = write(log, megabytes, args.shape)
            seconds, cpu, peak_mib, last = import_once(
                log, Path(scratch) / f"l{megabytes:g}.duckdb"
            )
            rows.append(
                {
                    "mb": round(size / 1e6, 1),
                    "seconds": seconds,
                    "mb_per_s": round(size / 1e6 / seconds, 2) if seconds else None,
                    "cpu_seconds": round(cpu, 2),
                    "mb_per_cpu_s": round(size / 1e6 / cpu, 2) if cpu else None,
                    "peak_rss_mib": round(peak_mib),
                    "rss_per_mb": round(peak_mib / (size / 1e6), 1),
                    "output": last,
                }
            )
            print(json.dumps(rows[-1]), flush=True)
            if args.keep:
                log.replace(args.keep)
            else:
                log.unlink()
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
