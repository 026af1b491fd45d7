#!/usr/bin/env bash
# The README's GPU plan run, on the lent H200 machine (no network there): wheels carried in .whl
# (see ../shared/gpu/README.md), tuneledger used from this checkout via PYTHONPATH.
# Usage (on the device, from the repo root): bash bench/run_h200_plan.sh OUT_DIR
set -euo pipefail
out=${1:?output directory}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
tl() {  # the tuneledger CLI with the `run` commands, without installing the package
  python3 -c 'import sys; from ledger.cli.main import cli, main; from runners.cli.group import run_group
cli.add_command(run_group); main(sys.argv[1:])' --ledger "$out/h200.duckdb" --actor runner:h200 "$@"
}
python3 - <<'PY'
import sys; sys.path.insert(0, "tests")
from tiny_model import build_tiny_model
print(build_tiny_model("/tmp/tiny-moe-gpu", hidden=1024, layers=4, experts=64, stop_at_eos=False))
PY
nvidia-smi --query-gpu=name,compute_cap,memory.total,driver_version --format=csv,noheader
tl run plan examples/plan-h200.toml 2>&1 | tee "$out/plan.log"
tl export markdown -o "$out/h200.md"
tl sql "SELECT config_name, concurrency, metric, round(baseline_value, 2) AS baseline, round(value, 2) AS value, round(change_pct, 1) AS change_pct, round(ci_low_pct, 1) AS ci_low, round(ci_high_pct, 1) AS ci_high, round(noise_threshold_pct, 1) AS tau_pct, verdict FROM benchmark_deltas ORDER BY concurrency, metric" | tee "$out/deltas.txt"
tl sql "SELECT flag, arch, verdict, basis FROM flag_verdicts" | tee -a "$out/deltas.txt"
