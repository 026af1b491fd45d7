"""Long-running tools as jobs, for clients whose tool calls time out before a plan ends.

A call to ``run_plan`` answers when the plan has run, minutes later; its progress
notifications keep a client waiting only if that client resets its timeout on progress, and
some stop listening after a fixed minute. ``start_job`` runs any long-running tool (the
runners' ``run_*`` and ``start_server``) in the background with the same arguments and answers
at once with a job id; ``job_status`` returns the progress lines so far and, once it ended,
the tool's structured output (or its error, as the tool would have answered it);
``cancel_job`` stops it at its next step as a cancelled call stops. Jobs live as long as the
server; what they record is in the ledger whatever happens to them.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field

from ledger.errors import InvalidInput, NotFound
from ledger.mcp.errors import error_payload
from ledger.mcp.toolbox import Arguments, Call, Seat, Toolbox, tool_from_models

#: The longest a ``job_status`` call waits for the job to end (below the usual 60 s timeouts).
MAX_WAIT_S = 50.0


@dataclass(eq=False)
class Job:
    """One background run of a tool."""

    id: str
    tool: str
    call: Call
    progress: list[dict[str, Any]] = field(default_factory=list)
    ended: threading.Event = field(default_factory=threading.Event)
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    started_at: float = field(default_factory=time.time)

    def state(self) -> str:
        if not self.ended.is_set():
            return "cancelling" if self.call.cancelled.is_set() else "running"
        if self.error is None:
            return "done"
        return "cancelled" if self.error["exit_code"] == 130 else "failed"


class Jobs:
    """The jobs of one server, by id."""

    def __init__(self, toolbox: Toolbox, register: Any) -> None:
        self.toolbox = toolbox
        self._register = register  # Calls.start / Calls.end: the server's shutdown waits for jobs
        self._jobs: dict[str, Job] = {}
        self._lock = threading.Lock()

    def start(
        self, seat: Seat, tool_name: str, arguments: dict[str, Any], actor: Any = None
    ) -> Job:
        """Start ``tool_name`` with ``arguments`` in a thread of its own.

        Raises:
            InvalidInput: no such tool, or one that is not long-running (call it directly).
        """
        tool = self.toolbox.get(tool_name)
        if tool is None or not tool.long_running:
            long = sorted(t.name for t in self.toolbox if t.long_running)
            raise InvalidInput(
                f"start_job: {tool_name!r} is not a long-running tool (these are: {', '.join(long)})"
            )
        job = Job(id=uuid.uuid4().hex[:12], tool=tool_name, call=Call(seat, actor=actor))

        def report(message: str, done: float | None, total: float | None) -> None:
            with self._lock:
                job.progress.append({"message": message, "done": done, "total": total})

        job.call.report = report
        starts, ends = self._register

        def run() -> None:
            try:
                job.result = tool.handler(arguments, job.call)
            except (Exception, KeyboardInterrupt) as exc:
                job.error = error_payload(exc)[1]["error"]
            finally:
                job.ended.set()
                ends(job.call)

        with self._lock:
            self._jobs[job.id] = job
        starts(job.call)
        threading.Thread(target=run, name=f"mcp-job-{job.id}", daemon=True).start()
        return job

    def get(self, job_id: str) -> Job:
        """Raises NotFound for an unknown id (exit 5)."""
        with self._lock:
            job = self._jobs.get(job_id)
        if job is None:
            raise NotFound(f"no job {job_id!r} on this server (jobs end with the server)")
        return job

    def status(self, job: Job, after: int = 0) -> dict[str, Any]:
        with self._lock:
            lines = list(job.progress[after:])
        return {
            "job_id": job.id,
            "tool": job.tool,
            "state": job.state(),
            "progress": lines,
            "next_progress": after + len(lines),
            "result": job.result if job.ended.is_set() else None,
            "error": job.error,
        }


class StartJobArgs(Arguments):
    tool: str = Field(
        description="A long-running tool: run_plan, run_bench, run_spec, run_tune, start_server, research_flags."
    )
    arguments: dict[str, Any] = Field(
        default_factory=dict, description="Its arguments, as the tool takes them."
    )


class JobStatusArgs(Arguments):
    job_id: str = Field(description="The job id start_job answered with.")
    wait_s: float = Field(
        0, ge=0, le=MAX_WAIT_S, description="Wait up to this long for the job to end."
    )
    progress_after: int = Field(
        0, ge=0, description="Return the progress lines after this many (next_progress)."
    )


class JobIdArgs(Arguments):
    job_id: str = Field(description="The job id start_job answered with.")


class JobOut(BaseModel):
    job_id: str
    tool: str
    state: Literal["running", "cancelling", "done", "failed", "cancelled"]
    progress: list[dict[str, Any]] = Field(description="{message, done, total} lines, in order.")
    next_progress: int
    result: dict[str, Any] | None = Field(description="The tool's structured output once done.")
    error: dict[str, Any] | None = Field(description="{exit_code, meaning, message} if it failed.")


def add_job_tools(toolbox: Toolbox, jobs: Jobs) -> None:
    """``start_job``, ``job_status``, ``cancel_job``."""

    def start(args: StartJobArgs, call: Call) -> dict[str, Any]:
        return jobs.status(jobs.start(call.seat, args.tool, args.arguments, call.actor))

    def status(args: JobStatusArgs, call: Call) -> dict[str, Any]:
        job = jobs.get(args.job_id)
        job.ended.wait(args.wait_s)
        return jobs.status(job, args.progress_after)

    def cancel(args: JobIdArgs, call: Call) -> dict[str, Any]:
        job = jobs.get(args.job_id)
        job.call.cancelled.set()
        return jobs.status(job, len(job.progress))

    toolbox.add(
        tool_from_models(
            "start_job",
            "Run a long-running tool (run_plan, run_bench, run_spec, run_tune, start_server, research_flags) in the "
            "background and answer at once with a job id: for clients whose tool calls time out "
            "before a plan ends. Poll job_status for its progress and result.",
            StartJobArgs,
            JobOut,
            start,
        )
    )
    toolbox.add(
        tool_from_models(
            "job_status",
            "A job's state, its progress lines after progress_after, and once it ended the tool's "
            "structured output (result) or error. wait_s waits (at most 50 s) for it to end.",
            JobStatusArgs,
            JobOut,
            status,
            read_only=True,
        )
    )
    toolbox.add(
        tool_from_models(
            "cancel_job",
            "Stop a job at its next step (a plan stops its server; what completed stays recorded).",
            JobIdArgs,
            JobOut,
            cancel,
        )
    )
