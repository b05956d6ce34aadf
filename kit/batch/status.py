"""How a job ended (`JobStatus`: a JobRecord's and an executor Outcome's) and where a batch run
stands (`BatchRunStatus`: state.json's `runs[].status`). Members are strings (StrEnum): they equal
and serialise as the values state.json and the per-job records hold.

>>> JobStatus.parse("timeout") == "timeout"
True
"""

from __future__ import annotations

from enum import StrEnum

from kit.errors import parse_member


class JobStatus(StrEnum):
    """How one job's notebook run ended."""

    OK = "ok"  # ran and the kit reported no error
    ERROR = "error"  # ran, the kit reported errors
    FAILED = "failed"  # a cell raised, or no readable results were written
    TIMEOUT = "timeout"  # killed at the job's time limit
    KILLED = "killed"  # its process died (mostly out of memory), or every Dask worker that ran it
    INTERRUPTED = "interrupted"  # the batch was stopped while it ran (Ctrl-C, SIGTERM)

    @classmethod
    def parse(cls, value: str) -> JobStatus:
        """The member `value` names; else UnknownValueError naming the allowed ones."""
        return parse_member(cls, value, "job status")

    def with_message(self, message: str) -> str:
        """'<status>: <message>', the status said once where the message opens with it.

        >>> JobStatus.KILLED.with_message("killed by SIGKILL (peak 2.0 GB)")
        'killed by SIGKILL (peak 2.0 GB)'
        >>> JobStatus.FAILED.with_message("ValueError: batch 0")
        'failed: ValueError: batch 0'
        """
        if not message:
            return self.value
        return message if message.lower().startswith(self.value) else f"{self.value}: {message}"


class BatchRunStatus(StrEnum):
    """Where one batch run stands in state.json."""

    RUNNING = "running"
    COMPLETE = "complete"
    INTERRUPTED = "interrupted"
    ABORTED = "aborted"  # found still running by a later batch: its end was never recorded
    REBUILT = "rebuilt"  # read back from outputs/runs/ by `kit rebuild-state`


#: the batch runs whose job list is whole (the index shows the latest of them)
FINISHED_RUNS = frozenset({BatchRunStatus.COMPLETE, BatchRunStatus.REBUILT})
