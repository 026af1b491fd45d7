"""The ``tuneledger`` CLI run inside the test process: ``ledger.cli.main`` with its own stdin,
stdout, stderr, working directory and environment, returning what ``subprocess.run`` would
(exit code, stdout, stderr), so a test reads the same either way.

For tests where the process boundary is not what is tested: starting ``python -m ledger.cli``
costs about a second a call on the 2-core machine; calling ``main`` costs milliseconds. Exit
codes, one-line errors and the bytes read from stdin are the CLI's own either way (``main``
maps every error to its exit code; ``run``, the console script, only adds ``os._exit``). An
unexpected exception, which a process would print as a traceback with exit 1, comes back the
same way.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import traceback
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from ledger.cli import main

#: Signals whose handlers a command may set (``run bench``: SIGTERM); restored after each call.
_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@contextmanager
def _environment(cwd: str | Path | None, env: Mapping[str, str] | None) -> Iterator[None]:
    old_cwd, old_env = os.getcwd(), dict(os.environ)
    handlers = {s: signal.getsignal(s) for s in _SIGNALS}
    try:
        if cwd is not None:
            os.chdir(cwd)
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        yield
    finally:
        os.chdir(old_cwd)
        if env is not None:
            os.environ.clear()
            os.environ.update(old_env)
        for s, handler in handlers.items():
            signal.signal(s, handler)


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
    out, err = io.BytesIO(), io.BytesIO()
    streams = (
        io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"),
        io.TextIOWrapper(out, encoding="utf-8", write_through=True),
        io.TextIOWrapper(err, encoding="utf-8", write_through=True),
    )
    old = sys.stdin, sys.stdout, sys.stderr
    code = 0
    with _environment(cwd, env):
        sys.stdin, sys.stdout, sys.stderr = streams
        try:
            main(argv)
        except SystemExit as exc:
            if isinstance(exc.code, int) or exc.code is None:
                code = exc.code or 0
            else:
                print(exc.code, file=sys.stderr)
                code = 1
        except Exception:  # what a process prints before exiting 1
            traceback.print_exc()
            code = 1
        finally:
            for stream in streams[1:]:
                stream.flush()
            sys.stdin, sys.stdout, sys.stderr = old
    return subprocess.CompletedProcess(
        ["tuneledger", *argv], code, out.getvalue().decode("utf-8"), err.getvalue().decode("utf-8")
    )
