"""Every SGLang log line the fact reader reads, each spelling with the SGLang versions that print it
and one example (``tests/engines/test_sglang_log.py`` reads each example), and the server args whose name
changed between versions. Versions are those whose source or published logs show the spelling."""

from __future__ import annotations

#: Every line the views need, each spelling with the SGLang versions that print it and one
#: example (tests/engines/test_sglang_log.py parses each example). ``fact`` names the ``ServerLogFacts``
#: field it sets. Versions are those whose source or published logs show the spelling.
LINE_SPELLINGS: tuple[tuple[str, str, str], ...] = (
    ("server_args", "<=0.5.14", "server_args=ServerArgs(model_path='/m', tp_size=2)"),
    ("server_args", "0.5.23", "server_args={'model_path': '/m', 'tp_size': 2}"),
    (
        "attention_backend",
        "0.4.x-0.5.3",
        "Attention backend not set. Use flashinfer backend by default.",
    ),
    (
        "attention_backend",
        "0.5.4-0.5.23",
        "Attention backend not specified. Use fa3 backend by default.",
    ),
    ("attention_backend", "0.4.x (MLA)", "MLA optimization is turned on. Use triton backend."),
    (
        "weight_load_s",
        "0.5.x",
        "Load weight end. elapsed=95.31 s, type=Qwen3MoeForCausalLM, avail mem=27.10 GB, mem usage=28.51 GB.",
    ),
    (
        "weights_loaded",
        "0.4.x-0.5.9",
        "Load weight end. type=Qwen2VLForConditionalGeneration, dtype=torch.bfloat16, avail mem=6.70 GB",
    ),
    (
        "kv_cache_tokens",
        "0.4.x-0.5.14",
        "KV Cache is allocated. #tokens: 394210, K size: 9.02 GB, V size: 9.02 GB",
    ),
    (
        "kv_cache_tokens",
        "0.5.23",
        "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 2980168, KV size: 31.83 GB",
    ),
    (
        "kv_cache_tokens",
        "0.5.23 (split K/V)",
        "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 535124, K size: 16.33 GB, V size: 16.33 GB",
    ),
    ("kv_cache_gb", "0.4.x", "KV Cache is allocated. K size: 1.02 GB, V size: 1.02 GB."),
    ("cuda_graph_bs", "0.4.x-0.5.14", "Capture cuda graph bs [1, 2, 4, 8, 16, 24, 32]"),
    (
        "cuda_graph_bs",
        "0.5.23 (decode)",
        "Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, bs=[1, 2, 4, 8, 12, 16, 24, 32], avail mem=7.10 GB",
    ),
    (
        "cuda_graph_bs",
        "0.5.23 (speculative: verify)",
        "Capture target verify CUDA graph begin. backend=full, num_tokens_per_bs=3, bs=[1, 2, 4, 8, 12, 16], avail mem=6.01 GB",
    ),
    (
        "cuda_graph_captured",
        "0.4.x-0.5.14",
        "Capture cuda graph end. Time elapsed: 13.41 s. mem usage=1.05 GB. avail mem=13.88 GB.",
    ),
    (
        "cuda_graph_captured",
        "0.5.23",
        "Capture target decode CUDA graph end. elapsed=0.89 s, mem usage=0.15 GB, avail mem=6.95 GB",
    ),
    (
        "piecewise_cuda_graph",
        "0.5.4-0.5.14",
        "Capture piecewise CUDA graph end. Time elapsed: 21.07 s. mem usage=0.69 GB. avail mem=11.98 GB.",
    ),
    (
        "piecewise_cuda_graph",
        "0.5.23 (prefill graph)",
        "Capture target prefill CUDA graph end. elapsed=3.83 s, mem usage=0.28 GB, avail mem=5.23 GB.",
    ),
    (
        "piecewise_disabled_reason",
        "0.5.4-0.5.23",
        "Disable piecewise CUDA graph because --disable-piecewise-cuda-graph is set",
    ),
    (
        "piecewise_disabled_reason",
        "0.5.23",
        "Disable prefill CUDA graph because cuda_graph_config resolved prefill.backend='disabled' (e.g. via --cuda-graph-backend-prefill=disabled or auto-disable rules).",
    ),
    (
        "piecewise_disabled_reason",
        "0.5.23",
        "Breakable CUDA graph is incompatible with multimodal model; disabling prefill CUDA graph.",
    ),
    (
        "max_running_requests",
        "0.4.x-0.5.23",
        "max_total_num_tokens=2980168, chunked_prefill_size=4096, max_prefill_tokens=16384, max_running_requests=4096, context_len=32768, available_gpu_mem=6.95 GB",
    ),
    (
        "max_running_requests",
        "0.3.x-0.4.0",
        "max_total_num_tokens=412345, max_prefill_tokens=16384, max_running_requests=2049, context_len=32768",
    ),
    (
        "overrides",
        "0.5.x (mamba)",
        "max_running_requests is capped to 24 by the mamba state cache (max_mamba_cache_size=96, 4 state slots per request)",
    ),
    (
        "overrides",
        "0.4.x-0.5.23",
        "Automatically reduce --mem-fraction-static to 0.760 because this is a multimodal model.",
    ),
    (
        "overrides",
        "0.4.x",
        "Automatically turn off --chunked-prefill-size and disable radix cache for qwen2-vl.",
    ),
    (
        "overrides",
        "0.5.23",
        "Disable --flashinfer-allreduce-fusion-backend because deterministic inference is enabled.",
    ),
    (
        "overrides",
        "0.4.x-0.5.x",
        "Overlap scheduler is disabled because of using eagle speculative decoding.",
    ),
    (
        "flashinfer_fusion_disabled",
        "0.5.9-0.5.23",
        "Disabling flashinfer allreduce fusion permanently.",
    ),
    (
        "moe_configs",
        "0.4.x-0.5.23",
        "Using default MoE kernel config. Performance might be sub-optimal! Config file not found at /x/triton_3_4_0/E=512,N=128,device_name=NVIDIA_H100.json, you can create them with https://github.com/sgl-project/sglang/tree/main/benchmark/kernels/fused_moe_triton",
    ),
    (
        "moe_configs",
        "0.5.x (_down)",
        "Using MoE kernel config with down_moe=False. Performance might be sub-optimal! Config file not found at /x/triton_3_4_0/E=512,N=128,device_name=NVIDIA_H100_down.json, you can create them with https://github.com/sgl-project/sglang/tree/main/benchmark/kernels/fused_moe_triton",
    ),
    (
        "moe_configs",
        "0.4.x-0.5.23",
        "Using MoE kernel config from /x/triton_3_4_0/E=512,N=128,device_name=NVIDIA_H100.json.",
    ),
    (
        "moe_configs",
        "0.5.x",
        "Config file not found at /x/triton_3_5_1/E=512,N=128,device_name=NVIDIA_H100.json. Fallback to triton version 3.4.0 and use MoE kernel config from /x/triton_3_4_0/E=512,N=128,device_name=NVIDIA_H100.json. Performance might be sub-optimal!",
    ),
    ("ready", "0.2.x-0.5.23", "The server is fired up and ready to roll!"),
    (
        "decode_batches",
        "0.4.x-0.5.x",
        "Decode batch. #running-req: 3, #token: 120, token usage: 0.01, gen throughput (token/s): 55.10, #queue-req: 0, ",
    ),
    (
        "decode_batches",
        "0.5.x-0.5.23",
        "Decode batch, #running-req: 67, #token: 27310, token usage: 0.01, cuda graph: False, gen throughput (token/s): 1702.18, #queue-req: 0, ",
    ),
)

#: Server args whose name changed across SGLang versions: the setting, then each (arg name,
#: versions, meaning). A finding names the flag as the log's own version spells it.
FLAG_NAMES: dict[str, tuple[tuple[str, str, str], ...]] = {
    "flashinfer allreduce fusion": (
        (
            "enable_flashinfer_allreduce_fusion",
            "0.4.x-0.5.14",
            "True turns the fusion on (0.5.23: deprecated alias, sets the backend to 'auto')",
        ),
        (
            "flashinfer_allreduce_fusion_backend",
            "0.5.23",
            "'auto' / 'trtllm' / 'mnnvl' turns it on; None off",
        ),
        (
            "enforce_disable_flashinfer_allreduce_fusion",
            "0.5.9-0.5.23",
            "True keeps it off whatever else says",
        ),
    ),
    "CUDA graph max batch size (decode)": (
        (
            "cuda_graph_max_bs",
            "0.4.x-0.5.14",
            "largest captured decode batch; 0.5.23: deprecated alias of cuda_graph_max_bs_decode",
        ),
        (
            "cuda_graph_max_bs_decode",
            "0.5.23",
            "largest captured decode batch (prefill has cuda_graph_max_bs_prefill)",
        ),
    ),
    "CUDA graph batch sizes (decode)": (
        ("cuda_graph_bs", "0.4.x-0.5.14", "the captured decode batch sizes"),
        ("cuda_graph_bs_decode", "0.5.23", "the captured decode batch sizes"),
    ),
    "piecewise / prefill CUDA graph": (
        ("enable_piecewise_cuda_graph", "0.5.3-0.5.7", "opt-in: off unless True"),
        ("disable_piecewise_cuda_graph", "0.5.8-0.5.23", "on by default; True turns it off"),
        (
            "cuda_graph_backend_prefill",
            "0.5.23",
            "'breakable' / 'tc_piecewise' / 'full' on, 'disabled' off",
        ),
    ),
}
