"""The ``tuneledger`` CLI run inside the test process: ``ledger.cli.main`` with its own stdin,
stdout, stderr, working directory and environment, returning what ``subprocess.run`` would
(exit code, stdout, stderr), so a test reads the same either way.

For tests where the process boundary is not what is tested: starting ``python -m ledger.cli.main``
costs about a second a call on the 2-core machine; calling ``main`` costs milliseconds. Exit
codes, one-line errors and the bytes read from stdin are the CLI's own either way (``main``
maps every error to its exit code; ``run``, the console script, only adds ``os._exit``). An
unexpected exception, which a process would print as a traceback with exit 1, comes back the
same way. The swapping is ``ledger.frontdoor.resident.call``, the code the resident process serves
forwarded ``append`` calls with.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from ledger.frontdoor.resident import call


def invoke(
    args: Sequence[str | Path],
    *,
    stdin: str | bytes | None = None,
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``tuneledger ARGS`` in this process; ``stdin`` text or bytes (empty when None)."""
    argv = [str(a) for a in args]
    data = stdin.encode("utf-8") if isinstance(stdin, str) else (stdin or b"")
    code, out, err = call(argv, stdin=data, cwd=cwd, env=env)
    return subprocess.CompletedProcess(
        ["tuneledger", *argv], code, out.decode("utf-8"), err.decode("utf-8")
    )
