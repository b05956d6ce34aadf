"""What a batch runs (Job) and what it keeps about each run (JobRecord)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

from kit.batch.status import JobStatus
from kit.errors import InvalidParameter
from kit.hardware.kinds import DEVICES, KINDS, kind_of
from kit.hardware.kinds import get as get_kind
from kit.paths import plain_name
from kit.results import ResultKind

STATUSES = tuple(JobStatus)  # what state.json may hold (kit.batch.status says what each means)

# Notebooks that time nothing: they need no hardware of their own.
UNTIMED_NOTEBOOKS = frozenset({ResultKind.PUBLISHED_RESULTS.notebook, ResultKind.SUMMARY.notebook})
# Notebooks whose jobs may share one warm kernel (kit.batch.local.WarmWorker): the model rows.
WARM_NOTEBOOKS = frozenset({ResultKind.MODEL_BENCHMARK.notebook})
# auto: where the job's hardware kind says so (HardwareKind.warm_kernel)
WARM_MODES = ("auto", "on", "off")


@dataclass
class Job:
    """One notebook execution: `name` is unique within a profile."""

    name: str
    notebook: str
    parameters: dict = field(default_factory=dict)
    timeout_s: int = 600
    after_all: bool = False  # runs once the others are done (the scorecard)

    def __post_init__(self) -> None:
        # both become paths: outputs/runs/<id>/<name>.json, notebooks/<notebook>
        plain_name(self.name, "job name")
        if not plain_name(self.notebook, "notebook").endswith(".ipynb"):
            raise InvalidParameter(
                "notebook", self.notebook, "a notebook file name ending in .ipynb"
            )


@dataclass(kw_only=True)
class JobRecord:
    """One job's outcome as kept in outputs/state.json and shown in the index."""

    name: str
    notebook: str
    status: JobStatus
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

    def __post_init__(self) -> None:
        self.status = JobStatus.parse(self.status)

    def to_dict(self) -> dict:
        return {**asdict(self), "status": str(self.status)}

    @classmethod
    def from_dict(cls, data: dict) -> JobRecord:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def hardware_resource(job: Job) -> str | None:
    """The hardware kind a job times on ('ipu', 'cuda', 'cpu'), or None when it times nothing.

    The job's `hardware` parameter (the kind the batch resolved); a hand-made job without it, the
    kind of its `device` (kit.hardware.kinds.kind_of: 'tensorrt' runs on 'cuda'), else the CPU.
    """
    if job.after_all or job.notebook in UNTIMED_NOTEBOOKS:
        return None
    params = job.parameters
    if params.get("hardware"):
        kind = str(params["hardware"])
        if kind not in KINDS:
            raise InvalidParameter(f"{job.name} hardware", kind, f"one of {', '.join(KINDS)}")
        return kind
    device = params.get("device") or ("ipu" if params.get("backend") == "ipu" else "cpu")
    try:
        return kind_of(str(device))
    except InvalidParameter as exc:
        raise InvalidParameter(
            f"{job.name} device", device, f"one of {', '.join(DEVICES)}"
        ) from exc


def check_warm_mode(mode: str) -> str:
    if mode not in WARM_MODES:
        raise InvalidParameter("warm kernel", mode, f"one of {', '.join(WARM_MODES)}")
    return mode


def runs_warm(job: Job, mode: str) -> bool:
    """Whether `job` runs in the batch's warm kernel under `mode` (auto, on, off): only jobs of a
    WARM_NOTEBOOKS notebook; with auto, those on a kind whose `warm_kernel` is set."""
    if check_warm_mode(mode) == "off" or job.notebook not in WARM_NOTEBOOKS:
        return False
    if mode == "on":
        return True
    kind = hardware_resource(job)
    return kind is not None and get_kind(kind).warm_kernel
