"""Score `tuneledger research` on a blind flag set (docs/research.md, *Measured blind*).

    python scripts/score_blind_flags.py tests/fixtures/blind_flags/set_c1 [--jobs 2] [--detail]

Each case folder holds the reader's ``answer.json`` (engine, version, flag, value, and per
target: arch, tp, model config, verdict, also_acceptable). Per target this runs, in a process
of its own as a user would, ``tuneledger research --engine ENGINE==VERSION --arch --tp
--model-config --flags "FLAG [VALUE]" --flag NAME --json --offline`` (the wheels from
``TUNELEDGER_WHEELS`` or the cache: nothing is downloaded). Right: the verdict is the reader's
or one the reader marked as equally defensible. Printed: verdicts right, and how often each
confidence level is right.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ledger.engines.research.flags_given import flag_words

#: the T1 targets name the seeds' model by a path of the collector's machine: the repository's copy
SEEDS_MODEL = Path(__file__).parents[1] / "examples" / "models" / "qwen3_5_moe" / "config.json"


def _model_config(case: Path, given: str) -> str:
    path = Path(given)
    if path.is_absolute():
        return str(path) if path.exists() else str(SEEDS_MODEL)
    return str(case / path)


def score_target(case: Path, answer: dict[str, Any], target: dict[str, Any]) -> dict[str, Any]:
    name = answer["flag"].lstrip("-")
    flags = flag_words(answer["flag"], answer.get("value"))
    command = [
        sys.executable,
        *("-m", "ledger.cli", "research"),
        *("--engine", f"{answer['engine']}=={answer['version']}", "--arch", target["arch"]),
        *("--tp", str(target["tp"]), "--model-config", _model_config(case, target["model_config"])),
        *("--flags", flags, "--flag", name, "--json", "--offline"),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    verdict = confidence = None
    try:
        rows = json.loads(done.stdout).get("flags", [])
        # the flag as the reader spelled it: an alias finds its definition
        row = next(r for r in rows if r["flag"] == name or f"--{name}" in r.get("options", []))
        verdict, confidence = row["verdict"], row.get("confidence")
    except (ValueError, StopIteration):
        confidence = f"error (exit {done.returncode})"
    accepted = {target["verdict"], *target.get("also_acceptable", [])}
    return {
        "case": case.name,
        "target": target["id"],
        "want": target["verdict"],
        "got": verdict,
        "confidence": confidence,
        "right": verdict in accepted,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("set", type=Path, help="a folder of case folders with answer.json")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--detail", action="store_true", help="one line per target")
    args = parser.parse_args()
    tasks = [
        (case, answer, target)
        for case in sorted(p for p in args.set.iterdir() if (p / "answer.json").is_file())
        for answer in [json.loads((case / "answer.json").read_text())]
        for target in answer["targets"]
    ]
    with ThreadPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(lambda task: score_target(*task), tasks))
    if args.detail:
        for row in rows:
            mark = "right" if row["right"] else "WRONG"
            print(
                f"{mark} {row['case']} {row['target']}: reader {row['want']}, "
                f"research {row['got']} ({row['confidence']})"
            )
    right = sum(row["right"] for row in rows)
    print(f"{args.set.name}: {right}/{len(rows)} verdicts right")
    levels: Counter[str] = Counter()
    hits: Counter[str] = Counter()
    for row in rows:
        levels[str(row["confidence"])] += 1
        hits[str(row["confidence"])] += row["right"]
    for level in sorted(levels):
        print(f"  {level}: {hits[level]}/{levels[level]} right")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
