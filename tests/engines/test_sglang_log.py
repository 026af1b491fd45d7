"""The SGLang server-log parser and its findings, on the real-format fixtures and synthesized lines."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from ledger.engines.gpu_arch import compute_capability_for
from ledger.engines.sglang_log import (
    derive_findings,
    parse_batch_fields,
    parse_server_args,
    parse_server_log,
    split_line,
)
from schemas import Host, StartupFacts

SERVER = Path(__file__).parents[1] / "fixtures" / "sglang" / "server"


def facts_of(name: str):
    return parse_server_log((SERVER / name).read_text(encoding="utf-8").splitlines())


def test_baseline_startup_facts() -> None:
    facts = facts_of("sm120_qwen35_baseline.log")
    startup = facts.to_startup_facts()
    assert startup.max_running_requests == 48
    assert startup.cuda_graph_bs == [1, 2, 4, 8, 12, 16, 24, 32, 40, 48]
    assert startup.piecewise_cuda_graph is True
    assert startup.piecewise_disabled_reason is None
    assert startup.moe_kernel_config == "default"
    assert [p.rsplit("/", 1)[-1] for p in startup.moe_config_paths] == [
        "E=256,N=256,device_name=NVIDIA_RTX_PRO_6000_Blackwell_Workstation_Edition.json",
        "E=256,N=256,device_name=NVIDIA_RTX_PRO_6000_Blackwell_Workstation_Edition_down.json",
    ]
    assert startup.max_total_num_tokens == 412345
    assert startup.kv_cache_tokens == 412345
    assert startup.context_len == 262144
    assert startup.chunked_prefill_size == 8192
    assert startup.max_prefill_tokens == 16384
    assert startup.available_gpu_mem_gb == 11.98
    assert startup.weight_load_s == 95.31
    assert startup.attention_backend == "triton"
    assert startup.server_args["tp_size"] == 4
    assert startup.server_args["model_path"] == "/models/Qwen3.5-122B-A10B"
    assert startup.server_args["json_model_override_args"] == "{}"
    assert facts.ready and facts.ready_after_s == 157.0
    assert facts.pid == 41234
    assert facts.crash is None
    assert facts.gpu_name == "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"
    # Prefill and decode lines, cuda graph flags and throughputs as logged.
    assert len(facts.prefill_batches) == 2 and facts.prefill_batches[1].fields["#new-token"] == 1024
    assert [(b.running_req, b.cuda_graph, b.gen_throughput) for b in facts.decode_batches][-1] == (
        48,
        True,
        1580.02,
    )
    # The tqdm bar and uvicorn lines did not disturb anything; the evidence points at real lines.
    assert facts.evidence["max_running_requests"].number == 18


def test_baseline_findings_are_only_default_moe_config() -> None:
    findings = derive_findings(facts_of("sm120_qwen35_baseline.log"), source_name="base.log")
    assert [f.kind for f in findings] == ["default-moe-config", "default-moe-config"]
    assert "NVIDIA_RTX_PRO_6000_Blackwell_Workstation_Edition_down.json" in findings[1].message
    assert findings[0].evidence[0].ref == "base.log:10"
    assert all(f.basis == "log" and f.engine == "sglang" for f in findings)


def test_flashinfer_fusion_log_and_findings_against_baseline() -> None:
    baseline = facts_of("sm120_qwen35_baseline.log").to_startup_facts()
    facts = facts_of("sm120_qwen35_flashinfer_fusion.log")
    assert facts.max_running_requests == 26
    assert facts.piecewise_cuda_graph is False
    assert facts.cuda_graph_bs == [1, 2, 4, 8, 12, 16, 24]
    findings = derive_findings(
        facts, previous=baseline, run_id="r1", session_id="s1", source_name="fi.log"
    )
    by_kind = {}
    for f in findings:
        by_kind.setdefault(f.kind, []).append(f)
    capacity = [f.message for f in by_kind["capacity-reduced"]]
    assert any("max_running_requests 48 -> 26" in m for m in capacity)
    assert any("max_total_num_tokens 412345 -> 223361" in m for m in capacity)
    (flag,) = by_kind["flag-not-in-effect"]
    assert flag.flag == "enable-flashinfer-allreduce-fusion" and flag.verdict == "not-activated"
    assert "sm120" in flag.message
    assert (
        flag.evidence[0].ref == "fi.log:1"
        and flag.evidence[0].text == "enable_flashinfer_allreduce_fusion=True"
    )
    (piecewise,) = by_kind["piecewise-cuda-graph-off"]
    assert "disable_piecewise_cuda_graph=True" in piecewise.message
    assert "enable_flashinfer_allreduce_fusion" in piecewise.message
    assert all(f.server_run_id == "r1" and f.session_id == "s1" for f in findings)


def test_flashinfer_fusion_on_hopper_is_not_flagged() -> None:
    facts = facts_of("sm120_qwen35_flashinfer_fusion.log")
    findings = derive_findings(facts, host=Host(gpu_name="NVIDIA H200", compute_capability="sm90"))
    assert "flag-not-in-effect" not in {f.kind for f in findings}


def test_crash_log() -> None:
    facts = facts_of("sm120_qwen35_fp8_capture_crash.log")
    assert not facts.ready
    assert facts.crash is not None and facts.crash.cause == "crash"
    assert "OutOfResources" in facts.crash.message
    assert "Required: 147456, Hardware limit: 101376" in facts.crash.message
    assert facts.crash.line.number == 12
    assert facts.crash.tail[-1].endswith(
        "Received sigquit from a child process. It usually means the child failed."
    )
    assert len(facts.crash.tail) <= 20
    # Capture never finished: whether piecewise would have been on is unknown.
    assert facts.piecewise_cuda_graph is None
    assert facts.kv_cache_tokens == 1384810
    assert "dtype=fp8_w8a8,block_shape=[128, 128]" in facts.moe_configs[0].path


def test_newer_format_with_level_and_file() -> None:
    facts = facts_of("native_api.launch_server.stdout.excerpt.log")
    assert facts.attention_backend == "fa3"
    assert facts.server_args == {}
    assert any("deprecated" in w.message for w in facts.warnings)


def test_dict_repr_server_args_and_old_decode_lines(tmp_path: Path) -> None:
    lines = [
        "[2026-05-01 10:00:00.123] server_args={'model_path': 'Qwen/Qwen3-30B-A3B', 'tp_size': 2, "
        "'enable_flashinfer_allreduce_fusion': True, 'disable_piecewise_cuda_graph': False, "
        "'cuda_graph_bs': [1, 2, 4], 'json_model_override_args': {'a': 1}, 'attention_backend': None}",
        "[2026-05-01 10:00:05.500 TP0] Disable piecewise CUDA graph because --enable-torch-compile is set.",
        "[2026-05-01 10:00:06 TP1 EP1] Capture cuda graph bs [1, 2, 4]",
        "[2026-05-01 10:00:07 TP0] Capture cuda graph end. Time elapsed: 3.00 s. mem usage=0.10 GB. avail mem=10.00 GB.",
        "[2026-05-01 10:00:07 TP0] Disabling flashinfer allreduce fusion permanently.",
        "  0%|          | 0/3 [00:00<?, ?it/s]",
        "[2026-05-01 10:00:08] The server is fired up and ready to roll!",
        "[2026-05-01 10:00:09 TP0] Decode batch. #running-req: 3, #token: 120, token usage: 0.01, "
        "gen throughput (token/s): 55.10, #queue-req: 0, ",
        "[2026-05-01 10:00:10 TP0] Decode batch, #running-req: 9, #token: 400, token usage: 0.02, "
        "accept len: 2.71, accept rate: 0.68, cuda graph: False, gen throughput (token/s): 201.50, #queue-req: 2",
    ]
    facts = parse_server_log(lines)
    assert facts.server_args["model_path"] == "Qwen/Qwen3-30B-A3B"
    assert facts.server_args["json_model_override_args"] == {"a": 1}
    assert facts.first_timestamp == datetime(2026, 5, 1, 10, 0, 0, 123000)
    assert facts.ready_after_s == pytest.approx(7.877)
    assert facts.attention_backend is None  # not logged and None in the args
    assert facts.piecewise_cuda_graph is False
    assert facts.piecewise_disabled_reason == "--enable-torch-compile is set"
    old, new = facts.decode_batches
    assert (old.running_req, old.cuda_graph, old.gen_throughput) == (3, None, 55.10)
    assert (new.running_req, new.cuda_graph, new.accept_len) == (9, False, 2.71)
    findings = derive_findings(facts, source_name="new.log")
    kinds = {f.kind: f for f in findings}
    eager = kinds["decode-without-cuda-graph"]
    assert "up to 9" in eager.message and "largest captured batch size 4" in eager.message
    assert "new.log:9" in [e.ref for e in eager.evidence]
    fusion = kinds["flag-not-in-effect"]
    assert "Disabling flashinfer allreduce fusion permanently" in fusion.message
    assert "new.log:5" in [e.ref for e in fusion.evidence]
    assert "--enable-torch-compile is set" in kinds["piecewise-cuda-graph-off"].message
    # The ledger model accepts the parsed facts (dict values are JSON-safe).
    assert (
        StartupFacts.model_validate(facts.to_startup_facts().model_dump(mode="json")).server_args[
            "tp_size"
        ]
        == 2
    )


def test_split_line_prefix_variants() -> None:
    line = split_line(3, "[2026-03-03 23:22:54.042 TP3 DP1 EP2] INFO server_args.py:1974: hello\n")
    assert line.ranks == {"TP": 3, "DP": 1, "EP": 2}
    assert line.level == "INFO" and line.message == "hello"
    assert line.timestamp == datetime(2026, 3, 3, 23, 22, 54, 42000)
    plain = split_line(4, "Capturing batches (bs=1 avail_mem=12.60 GB): 100%|██████████| 10/10")
    assert not plain.prefixed and plain.ranks == {}


def test_server_args_dataclass_repr_with_non_literals() -> None:
    args = parse_server_args("ServerArgs(a=1, b='x, y', c=device(type='cuda'), d=[1, 2], e=None)")
    assert args == {"a": 1, "b": "x, y", "c": "device(type='cuda')", "d": [1, 2], "e": None}
    # Not valid Python at all (an enum repr): split on top-level commas instead.
    args = parse_server_args("ServerArgs(a=1, fmt=<LoadFormat.AUTO: 'auto'>, b='z')")
    assert args["a"] == 1 and args["b"] == "z" and args["fmt"].startswith("<LoadFormat")
    with pytest.raises(ValueError):
        parse_server_args("nonsense")


def test_batch_fields() -> None:
    assert parse_batch_fields(" #running-req: 1, cuda graph: True, token usage: 0.00, ") == {
        "#running-req": 1,
        "cuda graph": True,
        "token usage": 0.0,
    }


@pytest.mark.parametrize(
    ("name", "sm"),
    [
        ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "sm120"),
        ("NVIDIA_RTX_PRO_6000_Blackwell_Max-Q_Workstation_Edition", "sm120"),
        ("NVIDIA_RTX_PRO_6000_Blackwell_Server_Edition", "sm120"),
        ("NVIDIA GeForce RTX 5090", "sm120"),
        ("NVIDIA H100 80GB HBM3", "sm90"),
        ("NVIDIA_H200", "sm90"),
        ("NVIDIA H20", "sm90"),
        ("NVIDIA GH200 480GB", "sm90"),
        ("NVIDIA B200", "sm100"),
        ("NVIDIA GB200", "sm100"),
        ("NVIDIA B300 SXM6 AC", "sm103"),
        ("NVIDIA_GeForce_RTX_4090", "sm89"),
        ("NVIDIA L40S", "sm89"),
        ("NVIDIA L4", "sm89"),
        ("NVIDIA A100-SXM4-80GB", "sm80"),
        ("NVIDIA A10G", "sm86"),
        ("NVIDIA A10", "sm86"),
        ("AMD Instinct MI300X", None),
        (None, None),
    ],
)
def test_compute_capability_table(name: str | None, sm: str | None) -> None:
    assert compute_capability_for(name) == sm


# --- every spelling of every line, bad values, wrapped lines ---------------------------------------

from ledger.engines.sglang_log import FLAG_NAMES, LINE_SPELLINGS, LogFormatError  # noqa: E402


@pytest.mark.parametrize(
    ("fact", "versions", "example"), LINE_SPELLINGS, ids=lambda v: v if len(str(v)) < 40 else None
)
def test_every_line_spelling_is_read(fact: str, versions: str, example: str) -> None:
    line = f"[2026-05-01 10:00:00 TP0] {example}"
    facts = parse_server_log([line], strict=True)
    if fact == "server_args":
        assert facts.server_args == {"model_path": "/m", "tp_size": 2}
    elif fact == "weights_loaded":
        assert facts.evidence["weights_loaded"].number == 1 and facts.has_startup_facts
    elif fact in ("moe_configs", "decode_batches", "overrides"):
        assert len(getattr(facts, fact)) == 1
    elif fact == "ready":
        assert facts.ready
    else:
        value = getattr(facts, fact)
        assert value not in (None, False, []), (fact, versions)
    # the same line from another rank first, or re-logged by a host program, reads the same
    wrapped = f"2026-05-01 10:00:00,531 - __main__ - INFO - [2026-05-01 10:00:00 TP1] {example}"
    again = parse_server_log([wrapped, line], strict=True)
    assert again.wrapped_lines == 1
    if fact not in (
        "server_args",
        "weights_loaded",
        "ready",
        "overrides",
        "decode_batches",
        "moe_configs",
        "flashinfer_fusion_disabled",
    ):
        assert getattr(again, fact) == getattr(facts, fact)
    if fact == "moe_configs":
        assert len(again.moe_configs) == 1  # one lookup, whichever rank printed it first


def test_flag_names_table_has_each_setting_by_version() -> None:
    assert [name for name, _, _ in FLAG_NAMES["flashinfer allreduce fusion"]][:2] == [
        "enable_flashinfer_allreduce_fusion",
        "flashinfer_allreduce_fusion_backend",
    ]
    assert [name for name, _, _ in FLAG_NAMES["CUDA graph max batch size (decode)"]] == [
        "cuda_graph_max_bs",
        "cuda_graph_max_bs_decode",
    ]


def test_0523_cuda_graph_flag_spelling_in_the_eager_finding() -> None:
    old = parse_server_log(
        [
            "[2026-05-01 10:00:00] Capture cuda graph bs [1, 2, 4]",
            "[2026-05-01 10:00:09] Decode batch, #running-req: 9, #token: 400, cuda graph: False, gen throughput (token/s): 2.0",
        ]
    )
    new = parse_server_log(
        [
            "[2026-05-01 10:00:00] Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, bs=[1, 2, 4], avail mem=1 GB",
            "[2026-05-01 10:00:09] Decode batch, #running-req: 9, #token: 400, cuda graph: False, gen throughput (token/s): 2.0",
        ]
    )
    (f_old,) = derive_findings(old)
    (f_new,) = derive_findings(new)
    assert "(see --cuda-graph-max-bs)" in f_old.message
    assert "(see --cuda-graph-max-bs-decode)" in f_new.message


@pytest.mark.parametrize(
    ("lines", "line_no", "field"),
    [
        (["[2026-02-30 10:00:00] server_args=ServerArgs(tp_size=1)"], 1, "timestamp"),
        (
            ["[2026-05-01 10:00:00] x", "[2026-05-01 24:00:00] Load weight end. elapsed=1.0 s"],
            2,
            "timestamp",
        ),
        (["[0000-05-01 10:00:00] The server is fired up and ready to roll!"], 1, "timestamp"),
        (
            ["[2026-05-01 10:00:00] server_args=ServerArgs(tp_size=2, pp_size='2')"],
            1,
            "server_args.pp_size",
        ),
        (
            [
                "[2026-05-01 10:00:00] max_total_num_tokens=10, chunked_prefill_size=8, max_prefill_tokens=8, "
                "max_running_requests=0, context_len=8"
            ],
            1,
            "max_running_requests",
        ),
        (
            [
                "[2026-05-01 10:00:00] max_total_num_tokens=10, chunked_prefill_size=8, max_prefill_tokens=8, "
                "max_running_requests=-1, context_len=8"
            ],
            1,
            "max_running_requests",
        ),
    ],
)
def test_impossible_values_are_refused_on_import_and_skipped_by_the_runner(
    lines: list[str], line_no: int, field: str
) -> None:
    with pytest.raises(LogFormatError) as exc:
        parse_server_log(lines, strict=True)
    assert (exc.value.line, exc.value.field) == (line_no, field)
    facts = parse_server_log(lines)  # the runner reads live logs: never raises
    assert facts.max_running_requests is None and "pp_size" not in facts.server_args
    derive_findings(facts, previous=StartupFacts(max_running_requests=0, max_total_num_tokens=0))


def test_zero_then_negative_capacity_never_divides_by_zero() -> None:
    facts = parse_server_log(
        [
            "[2026-05-01 10:00:00] max_total_num_tokens=10, chunked_prefill_size=8, "
            "max_prefill_tokens=8, max_running_requests=5, context_len=8"
        ]
    )
    assert derive_findings(facts, previous=StartupFacts(max_running_requests=0)) == []


def test_piecewise_finding_only_where_on_by_default_and_with_evidence() -> None:
    captured = [
        "[2026-05-01 10:00:00] Capture cuda graph bs [1, 2]",
        "[2026-05-01 10:00:01] Capture cuda graph end. Time elapsed: 1.0 s. mem usage=0.1 GB. avail mem=9 GB.",
    ]
    # opt-in era (the args have enable_piecewise_cuda_graph): off is the default, no finding
    opt_in = parse_server_log(
        [
            "[2026-05-01 09:59:59] server_args=ServerArgs(enable_piecewise_cuda_graph=False)",
            *captured,
        ]
    )
    assert opt_in.piecewise_cuda_graph is False and derive_findings(opt_in) == []
    # on by default (disable_piecewise_cuda_graph exists): the capture end line is the evidence
    on = parse_server_log(
        [
            "[2026-05-01 09:59:59] server_args=ServerArgs(disable_piecewise_cuda_graph=False)",
            *captured,
        ]
    )
    (f,) = derive_findings(on, source_name="l.log")
    assert f.kind == "piecewise-cuda-graph-off" and f.evidence[0].ref == "l.log:3"
    # unknown version, no args: only an engine version says
    bare = parse_server_log(captured)
    assert derive_findings(bare) == []
    assert [x.kind for x in derive_findings(bare, host=Host(engine_version="0.5.12"))] == [
        "piecewise-cuda-graph-off"
    ]
    assert derive_findings(bare, host=Host(engine_version="0.5.5")) == []
    # ready without any capture line: no evidence, no finding
    assert (
        derive_findings(
            parse_server_log(["[2026-05-01 10:00:00] The server is fired up and ready to roll!"]),
            host=Host(engine_version="0.5.12"),
        )
        == []
    )


def test_wrapped_lines_of_other_hosts_formats() -> None:
    facts = parse_server_log(
        [
            "sglang-1  | [2026-05-01 10:00:00 TP0] KV Cache is allocated. #tokens: 1000, K size: 1.00 GB, V size: 1.00 GB",
            "May 01 10:00:01 gpu1 python[811]: [2026-05-01 10:00:01] The server is fired up and ready to roll!",
            "2026-05-01 10:00:02,000 - __main__ - WARNING - Attempt 14: Please wait for sglang server to become ready...",
        ]
    )
    assert facts.kv_cache_tokens == 1000 and facts.ready and facts.wrapped_lines == 2


def test_a_progress_bar_glued_to_a_log_line_is_read() -> None:
    facts = parse_server_log(
        [
            "Capturing batches (bs=1 avail_mem=98.24 GB): 100%|##########| 3/3 [00:00<00:00,  4.70it/s]"
            "[2026-03-04 15:13:15] Capture cuda graph end. Time elapsed: 1.15 s. mem usage=1.06 GB. avail mem=98.23 GB.",
        ],
        strict=True,
    )
    assert facts.cuda_graph_captured and facts.wrapped_lines == 0


def test_decode_capture_wins_over_an_earlier_verify_capture() -> None:
    """A regression found by mypy (a ``LogLine`` compared with ``"verify"``, never equal): under speculative
    decoding the verify phase's batch sizes stand in only until the decode phase's are seen."""
    lines = [
        "[2026-08-02 11:40:20] Capture target verify CUDA graph begin. backend=full, "
        "num_tokens_per_req=4, bs=[1, 2, 4], avail mem=7.20 GB",
        "[2026-08-02 11:40:21] Capture target verify CUDA graph end. elapsed=0.50 s",
        "[2026-08-02 11:40:22] Capture target decode CUDA graph begin. backend=full, "
        "num_tokens_per_req=1, bs=[1, 2, 4, 8, 16], avail mem=7.10 GB",
        "[2026-08-02 11:40:23] Capture target decode CUDA graph end. elapsed=0.89 s",
    ]
    facts = parse_server_log(lines)
    assert facts.cuda_graph_bs == [1, 2, 4, 8, 16]
    only_verify = parse_server_log(lines[:2])
    assert only_verify.cuda_graph_bs == [1, 2, 4]
