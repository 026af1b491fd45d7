"""Where runners keep files that belong to a ledger: ``<ledger stem>.artifacts/`` beside it.

A ledger ``/data/campaign.duckdb`` keeps server logs under
``/data/campaign.artifacts/servers/<run_id>.log``. Events record these paths,
so the files must stay next to the ledger when it is moved.
"""

from __future__ import annotations

import re
from pathlib import Path

_SAFE_RE = re.compile(r"[^A-Za-z0-9._-]+")


def artifacts_dir(ledger_path: str | Path) -> Path:
    """The artifact folder of a ledger file (not created)."""
    path = Path(ledger_path)
    return path.with_name(f"{path.stem}.artifacts")


def safe_name(text: str) -> str:
    """``text`` made safe for a file name: runs of other characters become ``-``."""
    return _SAFE_RE.sub("-", text).strip("-") or "x"


def server_log_path(ledger_path: str | Path, run_id: str) -> Path:
    """``<ledger stem>.artifacts/servers/<run_id>.log``; the folder is created.

    Raises:
        OSError: the folder cannot be created.
    """
    folder = artifacts_dir(ledger_path) / "servers"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{safe_name(run_id)}.log"
