"""The ``tuneledger run bench`` command line that repeats a benchmark run: recorded as each run's
``source`` by ``run bench`` and by the MCP server's ``run_bench`` alike, so a run says how to
make it again whichever front end made it."""

from __future__ import annotations

import shlex


def reproducing_command(
    url: str,
    endpoint: str,
    model: str,
    input_len: int,
    output_len: int,
    num_prompts: int,
    concurrency_text: str | None,
    request_rate: float | None,
    seed: int,
    warmup: int,
    tokenizer: str | None,
    ignore_eos: bool,
    config_name: str,
) -> str:
    """The ``tuneledger run bench`` command line that repeats a run (recorded as its source)."""
    parts = [
        "tuneledger",
        "run",
        "bench",
        "--url",
        url,
        "--endpoint",
        endpoint,
        "--model",
        model,
        "--input-len",
        str(input_len),
        "--output-len",
        str(output_len),
        "--num-prompts",
        str(num_prompts),
        "--seed",
        str(seed),
        "--warmup",
        str(warmup),
        "--config-name",
        config_name,
    ]
    if concurrency_text:
        parts += ["--concurrency", concurrency_text.replace(" ", "")]
    if request_rate is not None:
        parts += ["--request-rate", f"{request_rate:g}"]
    if tokenizer:
        parts += ["--tokenizer", tokenizer]
    if not ignore_eos:
        parts.append("--no-ignore-eos")
    return shlex.join(parts)
