"""What sglang's bench_serving loses by opening a connection per request (docs/vllm-cpu.md,
"Client parity, measured").

    .venv-sglang/bin/python bench/sglang_connections.py http://127.0.0.1:PORT MODEL_DIR ROUNDS

sglang 0.5.23's completions request function, two arms interleaved in one process against one
running OpenAI-compatible server (32 requests of 64 words, 32 tokens out, c=4, 2 warm-up
requests a run): as shipped (a new aiohttp session, so a new connection, per request) and with
one shared session (connections kept alive, as ours and vLLM's clients do). Prints each run and
the paired ratio of the arms' output throughput.
"""

import asyncio
import math
import random
import statistics as st
import sys
import time
from argparse import Namespace
from pathlib import Path

from sglang.benchmark import serving as S

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from schemas.student_t import t975  # noqa: E402

URL = sys.argv[1] + "/v1/completions"
MODEL = sys.argv[2]
ROUNDS = int(sys.argv[3])
S.args = Namespace(
    disable_stream=False,
    disable_ignore_eos=False,
    return_logprob=False,
    top_logprobs_num=0,
    cache_report=False,
)
rng = random.Random(0)
WORDS = "ka lo mi nu te ra so vi pe du ne ga zo fi bu ri ma ho lu se".split()
PROMPTS = [" ".join(rng.choice(WORDS) for _ in range(64)) for _ in range(34)]
orig = S._create_bench_client_session


class _Shared:
    def __init__(self, s):
        self.s = s

    async def __aenter__(self):
        return self.s

    async def __aexit__(self, *a):
        return False


async def one_run(shared):
    sess = orig() if shared else None
    if shared:
        S._create_bench_client_session = lambda: _Shared(sess)
    else:
        S._create_bench_client_session = orig
    sem = asyncio.Semaphore(4)

    async def req(p):
        async with sem:
            inp = S.RequestFuncInput(
                prompt=p,
                api_url=URL,
                prompt_len=64,
                output_len=32,
                model=MODEL,
                lora_name="",
                image_data=None,
                extra_request_body={},
            )
            return await S.async_request_openai_completions(inp)

    for p in PROMPTS[:2]:
        await req(p)  # warm-up
    t0 = time.perf_counter()
    outs = await asyncio.gather(*(req(p) for p in PROMPTS[2:]))
    dur = time.perf_counter() - t0
    if shared:
        await sess.close()
    assert all(o.success for o in outs), [o.error for o in outs if not o.success][:2]
    toks = sum(o.output_len for o in outs)
    tpot = st.median((o.latency - o.ttft) / (o.output_len - 1) for o in outs) * 1000
    return (
        toks / dur,
        st.median(o.ttft for o in outs) * 1000,
        st.median(o.latency for o in outs) * 1000,
        tpot,
    )


async def main():
    res = {False: [], True: []}
    for r in range(ROUNDS):
        for shared in (False, True) if r % 2 == 0 else (True, False):
            x = await one_run(shared)
            res[shared].append(x)
            print(
                r,
                "shared" if shared else "per-request",
                " ".join(f"{v:.1f}" for v in x),
                flush=True,
            )
    for shared in (False, True):
        xs = res[shared]
        print(
            "shared" if shared else "per-request",
            "tok/s",
            round(st.geometric_mean([x[0] for x in xs]), 1),
            "ttft",
            round(st.median([x[1] for x in xs]), 1),
            "e2e",
            round(st.median([x[2] for x in xs]), 1),
            "tpot",
            round(st.median([x[3] for x in xs]), 2),
        )
    logs = [math.log(b[0] / a[0]) for a, b in zip(res[False], res[True], strict=True)]
    m = st.fmean(logs)
    h = t975(len(logs) - 1) * st.stdev(logs) / math.sqrt(len(logs))
    print(
        f"throughput shared / per-request: {math.expm1(m):+.1%} [{math.expm1(m - h):+.1%}, {math.expm1(m + h):+.1%}] (paired by round, 95%)"
    )


asyncio.run(main())
