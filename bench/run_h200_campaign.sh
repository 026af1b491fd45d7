#!/usr/bin/env bash
# The README's flag campaign on the lent H200 (no network there): wheels carried in .whl
# (../shared/gpu/fetch-wheels.sh), tuneledger used from this checkout (no install).
# Usage (on the device, from the repo root): bash bench/run_h200_campaign.sh OUT_DIR PART
#   PART 1: examples/h200-flags.toml (defaults vs continuous batching, dtype, attention; ~7.5 min)
#   PART 2: examples/h200-flags-cb.toml (flags on top of continuous batching; ~7.5 min)
# Each part keeps its own ledger and writes OUT_DIR/partN/: events.jsonl (the ledger as JSON
# lines: what bench/h200_data.py build-flags merges into data/h200_flags.jsonl), plan.log,
# deltas.txt (benchmark_deltas and flag_verdicts) and h200.md (the Markdown export).
set -uo pipefail
out=${1:?output directory}; part=${2:?part 1 or 2}
case "$part" in
  1) plan=examples/h200-flags.toml ;;
  2) plan=examples/h200-flags-cb.toml ;;
  *) echo "part must be 1 or 2" >&2; exit 2 ;;
esac
dir="$out/part$part"; mkdir -p "$dir"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
ledger=/tmp/h200-campaign-part$part.duckdb
rm -f "$ledger" "$ledger.wal"   # a rerun of a part starts clean: its export is that part alone
# the tuneledger CLI with the `run` commands, without installing the package
tl=(python3 -c 'import sys; from ledger.cli.main import cli, main; from runners.cli.group import run_group
cli.add_command(run_group); main(sys.argv[1:])' --ledger "$ledger" --actor runner:h200)
"${tl[@]}" --help >/dev/null || { echo "tuneledger does not import here" >&2; exit 1; }
[ -d /tmp/tiny-moe-gpu ] || python3 - <<'PY'
import sys; sys.path.insert(0, "tests")
from tiny_model import build_tiny_model
print(build_tiny_model("/tmp/tiny-moe-gpu", hidden=1024, layers=4, experts=64, stop_at_eos=False))
PY
nvidia-smi --query-gpu=name,compute_cap,memory.total,driver_version --format=csv,noheader | tee "$dir/gpu.txt"
start=$(date +%s)
# 540 s: the plan must end by itself (its comparisons are recorded at the end), inside the
# device's 600 s per call.
timeout 540 "${tl[@]}" run plan "$plan" --no-progress 2>&1 | tee "$dir/plan.log"
echo "plan: $(( $(date +%s) - start )) s" | tee -a "$dir/plan.log"
"${tl[@]}" sql "SELECT config_name, concurrency, metric, round(baseline_value, 2) AS baseline, round(value, 2) AS value, round(change_pct, 1) AS change_pct, round(ci_low_pct, 1) AS ci_low, round(ci_high_pct, 1) AS ci_high, verdict FROM benchmark_deltas ORDER BY config_name, concurrency, metric" > "$dir/deltas.txt"
"${tl[@]}" sql "SELECT flag, arch, verdict, basis FROM flag_verdicts" >> "$dir/deltas.txt"
"${tl[@]}" events --format json > "$dir/events.jsonl"
"${tl[@]}" export markdown -o "$dir/h200.md" 2>/dev/null || true
tail -n 40 "$dir/deltas.txt"
