"""What a batch runs (Job) and what it keeps about each run (JobRecord)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

from kit.errors import InvalidParameter

# ok: ran and the kit reported no error; error: ran, the kit reported errors; failed: a cell raised
# or no results were written; timeout: killed at the job's time limit; killed: the notebook's kernel
# or process died (most often out of memory); interrupted: the batch was stopped (Ctrl-C, SIGTERM).
STATUSES = ("ok", "error", "failed", "timeout", "killed", "interrupted")

# Notebooks that time nothing: they need no hardware of their own.
UNTIMED_NOTEBOOKS = frozenset({"published_results.ipynb", "summary.ipynb"})
HARDWARE_RESOURCES = ("ipu", "cuda", "cpu")
_ALIASES = {"gpu": "cuda"}


@dataclass
class Job:
    """One notebook execution: `name` is unique within a profile."""

    name: str
    notebook: str
    parameters: dict = field(default_factory=dict)
    timeout_s: int = 600
    after_all: bool = False  # runs once the others are done (the scorecard)


@dataclass
class JobRecord:
    """One job's outcome as kept in outputs/state.json and shown in the index."""

    name: str
    notebook: str
    status: str
    run_id: str
    duration_s: float
    fingerprint: str
    notebook_out: str
    html: str
    results: str
    message: str = ""
    reused: bool = False
    hardware: str = ""
    host: str = ""  # the machine the notebook ran on
    worker: str = ""  # the Dask worker (name or address), or "" when run in the batch's own process
    attempts: int = 1  # >1 when a lost worker's job was run again elsewhere
    note: str = ""  # what happened on the way (lost workers)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> JobRecord:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def hardware_resource(job: Job) -> str | None:
    """The hardware a job times on ('ipu', 'cuda', 'cpu'), or None when it times nothing.

    Read from the job's `device` or `hardware` parameter; a timed notebook without either runs
    on the CPU.
    """
    if job.after_all or job.notebook in UNTIMED_NOTEBOOKS:
        return None
    params = job.parameters
    value = params.get("device") or params.get("hardware") or ("ipu" if params.get("backend") == "ipu" else "cpu")
    kind = str(value).split(":")[0].lower()
    kind = _ALIASES.get(kind, kind)
    if kind not in HARDWARE_RESOURCES:
        raise InvalidParameter(f"{job.name} device", value, f"one of {', '.join(HARDWARE_RESOURCES)}")
    return kind
