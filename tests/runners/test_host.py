"""Host fingerprint: pure parsers on captured nvidia-smi output (the fake-GPU way), a fake
nvidia-smi program run for real, and this machine as it is (CPU only here)."""

from __future__ import annotations

import sys
from pathlib import Path

from runners.host import fingerprint, from_gpus, parse_cuda_version, parse_gpu_query
from schemas import Actor

FAKE_SMI = Path(__file__).resolve().parents[1] / "fake_servers" / "nvidia_smi.py"

H200_HEADER = """\
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 580.159.04             Driver Version: 580.159.04     CUDA Version: 13.0     |
|-----------------------------------------+------------------------+----------------------+
"""


def test_parse_h200_query_line() -> None:
    gpus = parse_gpu_query("NVIDIA H200, 9.0, 143771 MiB, 580.159.04\n")
    assert len(gpus) == 1
    gpu = gpus[0]
    assert (gpu.name, gpu.compute_capability, gpu.memory_mib, gpu.driver) == (
        "NVIDIA H200",
        "sm90",
        143771,
        "580.159.04",
    )


def test_parse_several_gpus_blank_lines_and_na() -> None:
    text = (
        "\n".join(
            ["NVIDIA RTX PRO 6000 Blackwell Workstation Edition, 12.0, 97887 MiB, 580.95.05"] * 4
        )
        + "\n\n"
    )
    gpus = parse_gpu_query(text + "garbage\nNVIDIA H100 80GB HBM3, [N/A], [N/A], 550.54.15\n")
    assert [g.compute_capability for g in gpus] == ["sm120"] * 4 + [
        "sm90"
    ]  # N/A: looked up by name
    assert gpus[-1].memory_mib is None


def test_parse_old_driver_without_compute_cap() -> None:
    gpus = parse_gpu_query("NVIDIA H200, 143771 MiB, 470.10\n", with_compute_cap=False)
    assert gpus[0].compute_capability == "sm90" and gpus[0].memory_mib == 143771


def test_cuda_version_from_header() -> None:
    assert parse_cuda_version(H200_HEADER) == "13.0"
    assert parse_cuda_version("no header") is None


def test_fingerprint_of_captured_h200_output() -> None:
    fp = from_gpus(
        parse_gpu_query("NVIDIA H200, 9.0, 143771 MiB, 580.159.04"),
        cuda=parse_cuda_version(H200_HEADER),
        hostname="gpu-box",
        versions={
            "torch": "2.11.0+cu130",
            "triton": "3.6.0",
            "python": "3.12.3",
            "transformers": "5.17.0",
        },
    )
    host = fp.host
    assert (host.gpu_name, host.compute_capability, host.gpu_count, host.gpu_memory_mib) == (
        "NVIDIA H200",
        "sm90",
        1,
        143771,
    )
    assert (host.driver, host.cuda, host.hostname) == ("580.159.04", "13.0", "gpu-box")
    assert not fp.cpu_only and fp.torch_version == "2.11.0+cu130" and fp.triton_version == "3.6.0"
    event = fp.with_engine("sglang", "0.5.12").to_event(
        session_id="s", actor=Actor(kind="runner", name="tuneledger")
    )
    assert (
        event.type == "host_observed"
        and event.host.engine == "sglang"
        and event.host.engine_version == "0.5.12"
    )
    assert event.other_versions == {"transformers": "5.17.0"} and event.gpu_names == ["NVIDIA H200"]


def test_fingerprint_key_is_stable_and_sensitive() -> None:
    a = from_gpus(parse_gpu_query("NVIDIA H200, 9.0, 143771 MiB, 580.159.04"))
    b = from_gpus(parse_gpu_query("NVIDIA H200, 9.0, 143771 MiB, 580.159.04"))
    c = from_gpus(parse_gpu_query("NVIDIA H200, 9.0, 143771 MiB, 580.159.05"))
    assert a.key() == b.key() != c.key()


def test_fingerprint_runs_a_fake_nvidia_smi(monkeypatch) -> None:
    monkeypatch.setenv("FAKE_GPU", "h200")
    monkeypatch.setenv("FAKE_GPU_COUNT", "8")
    # The real code path: shutil.which + subprocess on a program printing captured output.
    fp = fingerprint(nvidia_smi=str(FAKE_SMI))
    assert (
        fp.host.gpu_count == 8 and fp.host.compute_capability == "sm90" and fp.host.cuda == "13.0"
    )
    assert fp.host.driver == "580.159.04" and not fp.cpu_only


def test_fingerprint_with_injected_runner_handles_failures() -> None:
    calls = []

    def run(argv: list[str]) -> str | None:
        calls.append(argv)
        query = argv[1] if len(argv) > 1 else ""
        if "compute_cap" in query:
            return None  # an old driver refuses the compute_cap field
        return "NVIDIA H200, 143771 MiB, 470.10\n" if query.startswith("--query") else None

    fp = fingerprint(
        nvidia_smi=sys.executable, run=run
    )  # any existing program: run() answers for it
    assert fp.host.compute_capability == "sm90" and fp.host.cuda is None
    assert len(calls) == 3


def test_this_cpu_machine_is_cpu_only(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("TUNELEDGER_NVIDIA_SMI", str(tmp_path / "no-such-nvidia-smi"))
    fp = fingerprint()
    if fp.gpu_names:  # pragma: no cover - only on a GPU machine with torch
        assert fp.host.gpu_count == len(fp.gpu_names)
        return
    assert fp.cpu_only and fp.host.gpu_count == 0 and fp.host.gpu_name is None
    assert fp.python_version == sys.version.split()[0]
    assert fp.host.hostname


CAPTURED = Path(__file__).resolve().parents[1] / "fake_servers" / "captured"


def test_real_h200_output_captured_on_the_gpu_machine() -> None:
    gpus = parse_gpu_query((CAPTURED / "nvidia_smi_h200_query.txt").read_text())
    old = parse_gpu_query(
        (CAPTURED / "nvidia_smi_h200_query_old.txt").read_text(), with_compute_cap=False
    )
    assert gpus == old  # the name lookup gives what compute_cap says
    fp = from_gpus(gpus, cuda=parse_cuda_version((CAPTURED / "nvidia_smi_h200.txt").read_text()))
    assert (fp.host.gpu_name, fp.host.compute_capability, fp.host.gpu_memory_mib) == (
        "NVIDIA H200",
        "sm90",
        143771,
    )
    assert (fp.host.driver, fp.host.cuda, fp.host.gpu_count) == ("580.159.04", "13.0", 1)
