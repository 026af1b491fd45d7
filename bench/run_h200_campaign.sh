#!/usr/bin/env bash
# The README's flag campaign and speculative trial on the lent H200 (no network there): wheels
# carried in .whl (../shared/gpu/fetch-wheels.sh), tuneledger used from this checkout.
# Usage (on the device, from the repo root): bash bench/run_h200_campaign.sh OUT_DIR PART
#   PART 1: examples/h200-flags.toml and examples/h200-spec.toml; PART 2: examples/h200-flags-cb.toml
# The ledger is OUT_DIR/h200.duckdb (both parts append to it when the machine is kept).
set -uo pipefail
out=${1:?output directory}; part=${2:-1}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
ledger=/tmp/h200-campaign.duckdb
# the tuneledger CLI with the `run` commands, without installing the package
tl=(python3 -c 'import sys; from ledger.cli import cli, main; from runners.cli import run_group
cli.add_command(run_group); main(sys.argv[1:])' --ledger "$ledger" --actor runner:h200)
[ -d /tmp/tiny-moe-gpu ] || python3 - <<'PY'
import sys; sys.path.insert(0, "tests")
from tiny_model import build_tiny_model
print(build_tiny_model("/tmp/tiny-moe-gpu", hidden=1024, layers=4, experts=64, stop_at_eos=False))
PY
nvidia-smi --query-gpu=name,compute_cap,memory.total,driver_version --format=csv,noheader
if [ "$part" = 1 ]; then
  timeout 300 "${tl[@]}" run plan examples/h200-flags.toml --no-progress 2>&1 | tee "$out/plan1.log"
  timeout 150 "${tl[@]}" run spec examples/h200-spec.toml --no-progress 2>&1 | tee "$out/spec.log"
else
  timeout 240 "${tl[@]}" run plan examples/h200-flags-cb.toml --no-progress 2>&1 | tee "$out/plan2.log"
fi
"${tl[@]}" sql "SELECT config_name, concurrency, metric, round(baseline_value, 2) AS baseline, round(value, 2) AS value, round(change_pct, 1) AS change_pct, round(ci_low_pct, 1) AS ci_low, round(ci_high_pct, 1) AS ci_high, verdict FROM benchmark_deltas ORDER BY config_name, concurrency, metric" | tee "$out/deltas.txt"
"${tl[@]}" sql "SELECT flag, arch, verdict, basis FROM flag_verdicts" | tee -a "$out/deltas.txt"
"${tl[@]}" events --format json > "$out/events.json"
cp "$ledger" "$out/h200.duckdb" 2>/dev/null; true
