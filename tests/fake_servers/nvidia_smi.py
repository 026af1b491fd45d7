#!/usr/bin/env python3
"""A fake ``nvidia-smi`` printing captured output of a real one (the GPU from ``FAKE_GPU``).

``FAKE_GPU=h200`` (default): an H200 as seen on the lent GPU machine (driver 580.159.04,
CUDA 13.0); ``FAKE_GPU=rtx6000``: 4x RTX PRO 6000 Blackwell (SM120) as in the seeds.
``FAKE_GPU_COUNT`` repeats the GPU line. Used through ``TUNELEDGER_NVIDIA_SMI``.
"""

import os
import sys

GPUS = {
    "h200": ("NVIDIA H200, 9.0, 143771 MiB, 580.159.04", "580.159.04", "13.0"),
    "rtx6000": (
        "NVIDIA RTX PRO 6000 Blackwell Workstation Edition, 12.0, 97887 MiB, 580.95.05",
        "580.95.05",
        "13.0",
    ),
}
line, driver, cuda = GPUS[os.environ.get("FAKE_GPU", "h200")]
count = int(os.environ.get("FAKE_GPU_COUNT", "1"))
if any(arg.startswith("--query-gpu=") for arg in sys.argv[1:]):
    print("\n".join([line] * count))
else:
    print(
        "+-----------------------------------------------------------------------------------------+"
    )
    print(
        f"| NVIDIA-SMI {driver}             Driver Version: {driver}     CUDA Version: {cuda}     |"
    )
    print(
        "+-----------------------------------------+------------------------+----------------------+"
    )
