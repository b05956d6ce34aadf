"""Memory: peak resident memory of a job, memory available, and a check before a heavy step.

`resources()` is what a study stores in its result JSON (`RunResult.resources`): the peak
resident set size (RSS) of this process (VmHWM) and of the largest child it waited for
(getrusage ru_maxrss). `check_memory(step, model_bytes)` compares a step's expected
need (model size x the step's measured ratio + a fixed base, table `STEP_COSTS`) with the memory
available and raises `InsufficientMemory` ("needs about N GB, M GB available") before the
kernel's out-of-memory killer gets there. The memory available and the limit are what this
process may use: MemAvailable and MemTotal capped by every cgroup limit over it, v2 or v1
(`cgroup_limits`: `docker run -m` on either kind of host, a systemd slice).
"""

from __future__ import annotations

import ctypes
import gc
import os
import resource
import sys
from dataclasses import dataclass
from pathlib import Path

import psutil

from kit.errors import KitError, UnknownNameError
from kit.results import Resources
from kit.results.sections import WARM_KERNEL

GB = 1e9
MEMINFO = Path("/proc/meminfo")
CGROUP = Path("/sys/fs/cgroup")  # where the cgroup filesystem is mounted (v2, or v1's controllers)
SELF_CGROUP = Path("/proc/self/cgroup")  # this process's cgroup in each hierarchy
# "1": skip the pre-flight check (the step may then be killed)
SKIP_CHECK_ENV = "KIT_SKIP_MEMORY_CHECK"


class InsufficientMemory(KitError, MemoryError):
    """A step needs more memory than the machine has available now."""

    need_bytes: float = 0.0
    available_bytes: float = 0.0

    @classmethod
    def for_step(
        cls,
        what: str,
        need_bytes: float,
        available_bytes: float,
        detail: str = "",
    ) -> InsufficientMemory:
        error = cls(
            f"{what} needs about {need_bytes / GB:.1f} GB, {available_bytes / GB:.1f} GB "
            f"available{f' ({detail})' if detail else ''}; free memory, or set "
            f"{SKIP_CHECK_ENV}=1 to try anyway"
        )
        error.need_bytes, error.available_bytes = need_bytes, available_bytes
        return error


def _maxrss_bytes(who: int) -> int:
    """ru_maxrss in bytes (kilobytes on Linux, bytes on macOS)."""
    value = resource.getrusage(who).ru_maxrss
    return int(value if sys.platform == "darwin" else value * 1024)


def peak_rss_bytes() -> int:
    """Peak RSS of this process or of its largest waited-for child, whichever is higher."""
    return max(own_peak_rss_bytes(), _maxrss_bytes(resource.RUSAGE_CHILDREN))


def own_peak_rss_bytes(status: Path = Path("/proc/self/status")) -> int:
    """This process's own peak RSS since it started its program (VmHWM).

    ru_maxrss of a child also counts its parent's RSS at the fork before exec; VmHWM does not.
    Falls back to ru_maxrss where /proc is absent.
    """
    try:
        return parse_meminfo(status.read_text())["VmHWM"]
    except (OSError, KeyError):
        return _maxrss_bytes(resource.RUSAGE_SELF)


def release_freed_memory() -> None:
    """Hand memory the allocator has freed back to the system (glibc malloc_trim), where possible.

    After a framework drops a model, glibc keeps the freed pages in its heap; the next step's
    allocations would then add to a high-water mark that no longer reflects live data.
    """
    gc.collect()
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):  # not glibc (musl, ...): nothing to trim
            pass


M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters
STEADY_MMAP_THRESHOLD = 32 << 20  # glibc's own ceiling for its dynamic threshold on 64-bit


def steady_allocator() -> str:
    """Fix glibc malloc's mmap threshold (32 MiB) and trim threshold (64 MiB) at the values its
    dynamic rule ends at once a large block has been freed; returns what was done, for provenance.

    glibc starts the mmap threshold at 128 KiB and raises it only when a large mmapped block is
    freed. Until then every large tensor of every call is a fresh mmap whose pages fault on first
    touch: the first bf16 model in a process ran at 1.8 calls/s where a second one, loaded after
    the first was freed, ran at 3.3 (DeBERTa, measured here). A timed figure must not depend on what
    ran before it in the process (a search probe or not), so every study starts from the state
    the dynamic rule would reach anyway.
    """
    if not sys.platform.startswith("linux"):
        return "allocator left as it is (not Linux)"
    try:
        libc = ctypes.CDLL("libc.so.6")
        ok = libc.mallopt(M_MMAP_THRESHOLD, STEADY_MMAP_THRESHOLD) and libc.mallopt(
            M_TRIM_THRESHOLD, 2 * STEADY_MMAP_THRESHOLD
        )
    except (OSError, AttributeError):
        return "allocator left as it is (not glibc)"
    if not ok:
        return "allocator left as it is (glibc refused mallopt)"
    return (
        f"glibc malloc: mmap threshold {STEADY_MMAP_THRESHOLD >> 20} MiB and trim threshold "
        f"{2 * STEADY_MMAP_THRESHOLD >> 20} MiB fixed before the study "
        "(kit.measure.memory.steady_allocator)"
    )


def resources() -> Resources:
    """Peak memory of this job so far, a result's `resources` section. In a warm kernel
    (start_warm_peaks) the children's figure, which getrusage never resets, counts towards the
    peak only where a child of this job raised it."""
    self_peak = own_peak_rss_bytes()
    children_peak = _maxrss_bytes(resource.RUSAGE_CHILDREN)
    warm = WARM_PEAKS.get(os.environ.get(WARM_ENV, ""), "")
    before = _CHILDREN_AT_JOB_START[-1] if warm and _CHILDREN_AT_JOB_START else None
    counted = children_peak if before is None or children_peak > before else 0
    if before is not None:
        warm += (
            f"; the children's figure {'is' if counted else 'is not'} this job's (the earlier "
            f"jobs' largest child: {before / GB:.2f} GB)"
        )
    return Resources.from_dict(
        {
            "peak_rss_bytes": max(self_peak, counted),
            "peak_rss_self_bytes": self_peak,
            "peak_rss_children_bytes": children_peak,
            "method": "this process's VmHWM (/proc/self/status), and getrusage ru_maxrss of the "
            "largest child process it waited for" + warm,
        }
    )


# Set by the batch's warm kernel before each job it runs (kit.notebook.start_warm_job): whether
# this process's VmHWM was reset for the job. getrusage of the children is never reset.
WARM_ENV = "KIT_WARM_KERNEL"
WARM_PEAKS = {
    "reset": f"; {WARM_KERNEL}: VmHWM reset before this job to what "
    "the kernel then held (the libraries and allocator caches earlier jobs left), the children's "
    "figure since the kernel started",
    "since-start": f"; {WARM_KERNEL}: both figures since the kernel "
    "started (this system did not reset VmHWM)",
}
_CHILDREN_AT_JOB_START: list[int] = []  # getrusage's children figure when the warm job began


def start_warm_peaks() -> bool:
    """In a warm kernel before a job: freed memory handed back to the system, the children's
    figure so far noted, VmHWM reset; True where the reset took."""
    release_freed_memory()
    _CHILDREN_AT_JOB_START[:] = [_maxrss_bytes(resource.RUSAGE_CHILDREN)]
    return reset_peak()


def reset_peak(
    clear_refs: Path = Path("/proc/self/clear_refs"), status: Path = Path("/proc/self/status")
) -> bool:
    """Reset this process's VmHWM to its current RSS (Linux 4.0 and later); True only where the
    peak then fell to the RSS (some sandboxed kernels take the write and keep the peak)."""
    try:
        clear_refs.write_text("5")
        fields = parse_meminfo(status.read_text())
    except OSError:
        return False
    peak, now = fields.get("VmHWM"), fields.get("VmRSS")
    return peak is not None and now is not None and peak - now <= RESET_SLACK_BYTES


RESET_SLACK_BYTES = 4 * 2**20  # what RSS may fall between the reset and the read that checks it


def parse_meminfo(text: str) -> dict[str, int]:
    """/proc/meminfo as {field: bytes}."""
    fields = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            fields[name.strip()] = int(parts[0]) * (1024 if parts[1:] == ["kB"] else 1)
    return fields


@dataclass(frozen=True)
class CgroupLimit:
    """One cgroup memory limit over this process: its limit and what is charged to it that the
    kernel cannot reclaim (usage less the inactive page cache)."""

    limit_bytes: int
    used_bytes: int
    where: Path  # the file that sets it

    @property
    def room_bytes(self) -> int:
        return max(self.limit_bytes - self.used_bytes, 0)


# (limit file, usage file, the memory.stat fields of reclaimable page cache, first found used)
_V2 = ("memory.max", "memory.current", ("inactive_file",))
_V1 = ("memory.limit_in_bytes", "memory.usage_in_bytes", ("total_inactive_file", "inactive_file"))


def own_cgroups(self_cgroup: Path = SELF_CGROUP) -> dict[str, str]:
    """This process's cgroup paths: {'v2': '/a/b'} from the `0::` line and {'v1': ...} from the
    memory controller's line of /proc/self/cgroup; {} where it cannot be read."""
    try:
        lines = self_cgroup.read_text().splitlines()
    except OSError:
        return {}
    found = {}
    for line in lines:
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hierarchy == "0" and not controllers:
            found["v2"] = path
        elif "memory" in controllers.split(","):
            found["v1"] = path
    return found


def cgroup_limits(root: Path = CGROUP, self_cgroup: Path = SELF_CGROUP) -> list[CgroupLimit]:
    """Every memory limit over this process, cgroup v2 (`memory.max`) and v1
    (`memory/memory.limit_in_bytes`), at its own cgroup and each one above it.

    `root` is where the cgroup filesystem is mounted. Inside a container the process's recorded
    path may not exist under the container's mount (v1 without a cgroup namespace): the mount's
    top folder is then the container's own cgroup, and is read too.
    """
    paths = own_cgroups(self_cgroup)
    v2 = [
        _limit(d, *_V2) for m in (root, root / "unified") for d in _levels(m, paths.get("v2", "/"))
    ]
    v1 = [_limit(d, *_V1) for d in _levels(root / "memory", paths.get("v1", "/"))]
    return [limit for limit in v2 + v1 if limit is not None]


def _levels(mount: Path, path: str) -> list[Path]:
    """The folders of cgroup `path` and of every cgroup above it under `mount`, those present."""
    parts = [p for p in path.split("/") if p and p not in (".", "..")]
    folders = [mount.joinpath(*parts[:n]) for n in range(len(parts), -1, -1)]
    return [f for f in folders if f.is_dir()]


def _limit(
    folder: Path, limit_file: str, usage_file: str, reclaimable: tuple[str, ...]
) -> CgroupLimit | None:
    try:
        limit = (folder / limit_file).read_text().strip()
        used = int((folder / usage_file).read_text().strip())
    except (OSError, ValueError):
        return None
    if not limit.isdigit():  # "max": no limit at this level
        return None
    return CgroupLimit(
        int(limit),
        max(used - _stat_field(folder / "memory.stat", reclaimable), 0),
        folder / limit_file,
    )


def _stat_field(stat: Path, names: tuple[str, ...]) -> int:
    """The first of `names` in a cgroup's memory.stat, in bytes; 0 where absent."""
    try:
        fields = dict(
            line.split()[:2] for line in stat.read_text().splitlines() if len(line.split()) >= 2
        )
    except OSError:
        return 0
    return next((int(fields[n]) for n in names if fields.get(n, "").isdigit()), 0)


def cgroup_available_bytes(root: Path = CGROUP, self_cgroup: Path = SELF_CGROUP) -> int | None:
    """Room left under the tightest cgroup memory limit (v2 or v1), or None without a limit."""
    limits = cgroup_limits(root, self_cgroup)
    return min(limit.room_bytes for limit in limits) if limits else None


def available_bytes(
    meminfo: Path | None = None, cgroup: Path | None = None, self_cgroup: Path | None = None
) -> int:
    """Memory a new allocation can get without swapping or being killed: MemAvailable, capped by
    the room left under every cgroup limit over this process (v2 or v1: a container's `-m`)."""
    meminfo, cgroup, self_cgroup = meminfo or MEMINFO, cgroup or CGROUP, self_cgroup or SELF_CGROUP
    try:
        available = parse_meminfo(meminfo.read_text())["MemAvailable"]
    except (OSError, KeyError):
        available = int(psutil.virtual_memory().available)
    limit = cgroup_available_bytes(cgroup, self_cgroup)
    return available if limit is None else min(available, limit)


@dataclass(frozen=True)
class StepCost:
    """Peak RSS of a step ~ ratio x the ONNX file size + base (the framework's own footprint)."""

    ratio: float
    base_bytes: float
    source: str

    def need(self, model_bytes: float) -> float:
        return self.ratio * model_bytes + self.base_bytes


MEASURED = "benchmarks/memory.py (make bench) over the seed models, 2026-11"
# Peak RSS ~ ratio x ONNX file + base, fitted above every seed model's measured peak (the
# largest: Swin-L export 3.9 GB at 4.9x, Swin-L fp16 4.0 GB at 5.0x, Swin-L static int8 6.6 GB at
# 8.3x (dynamic: 2.6 GB), RoFormer export 3.6 GB at 7.3x its 0.5 GB file (3.4 GB without oneDNN));
# `make bench` prints them.
STEP_COSTS: dict[str, StepCost] = {
    "export-torch": StepCost(4.3, 0.6 * GB, MEASURED),
    "export-tensorflow": StepCost(6.0, 1.0 * GB, MEASURED),
    "fp16": StepCost(4.8, 0.3 * GB, MEASURED),
    "int8-dynamic": StepCost(3.3, 0.25 * GB, MEASURED),
    "int8-static": StepCost(8.0, 0.3 * GB, MEASURED),
}


def conversion_budget(model_bytes: float) -> float:
    """What an export or conversion may take: 3 x the model's ONNX file + 2 GB (`make bench` checks
    it)."""
    return 3 * model_bytes + 2 * GB


def estimate_need(step: str, model_bytes: float) -> float:
    """Expected peak RSS in bytes of `step` on a model whose ONNX file has `model_bytes`."""
    if step not in STEP_COSTS:
        raise UnknownNameError("memory step", step, STEP_COSTS)
    return STEP_COSTS[step].need(model_bytes)


def check_memory(
    step: str,
    model_bytes: float,
    what: str,
    *,
    meminfo: Path | None = None,
    cgroup: Path | None = None,
) -> float:
    """Raise InsufficientMemory if `step` will not fit in the memory available; returns the need."""
    need = estimate_need(step, model_bytes)
    if os.environ.get(SKIP_CHECK_ENV) == "1":
        return need
    available = available_bytes(meminfo, cgroup)
    if need > available:
        cost = STEP_COSTS[step]
        raise InsufficientMemory.for_step(
            what,
            need,
            available,
            f"{cost.ratio:g} x the {model_bytes / GB:.2f} GB model + "
            f"{cost.base_bytes / GB:.1f} GB, measured by {cost.source}",
        )
    return need


# A killed process is guessed out of memory only when its peak reached this share of the limit:
# the kernel's OOM killer picks the largest process, and a small one killed is someone's doing.
NEAR_LIMIT = 0.5


def memory_limit_bytes(
    meminfo: Path | None = None, cgroup: Path | None = None, self_cgroup: Path | None = None
) -> int | None:
    """What this process may hold: MemTotal, capped by every cgroup limit over it (v2 or v1)."""
    meminfo, cgroup, self_cgroup = meminfo or MEMINFO, cgroup or CGROUP, self_cgroup or SELF_CGROUP
    limits = [limit.limit_bytes for limit in cgroup_limits(cgroup, self_cgroup)]
    try:
        limits.append(parse_meminfo(meminfo.read_text())["MemTotal"])
    except (OSError, KeyError):
        pass
    return min(limits) if limits else None


@dataclass(frozen=True)
class Peak:
    """A process's peak RSS in GB: exact (`low_gb == high_gb`), or a range where wait4's figure may
    be its parent's (a spawned child's ru_maxrss counts its parent's RSS at the spawn)."""

    low_gb: float | None
    high_gb: float | None

    @classmethod
    def exact(cls, gb: float | None) -> Peak:
        return cls(gb, gb)


def child_peak(ru_maxrss_bytes: int, seen_bytes: int | None = None) -> Peak:
    """A waited-for child's own peak: ru_maxrss where it is above this process's own peak (then it
    can only be the child's); otherwise at most that, and at least the child's VmHWM last seen."""
    if ru_maxrss_bytes > own_peak_rss_bytes():
        return Peak.exact(ru_maxrss_bytes / GB)
    return Peak(seen_bytes / GB if seen_bytes else None, ru_maxrss_bytes / GB)


def running_peak_rss_bytes(pid: int) -> int | None:
    """A running process's peak RSS since it started its program; None once it is gone."""
    try:
        return parse_meminfo(Path(f"/proc/{pid}/status").read_text())["VmHWM"]
    except (OSError, KeyError):
        return None


def oom_message(how: str, peak: Peak | float | None, limit_gb: float | None = None) -> str:
    """'<how> (likely out of memory: peak X GB of Y GB)' when the peak came near the memory limit
    (`limit_gb`, default this machine's); otherwise the peak, and that it was not memory. Where
    only a range of the peak is known, the bound that decides is named ('at least', 'at most')."""
    if limit_gb is None:
        limit = memory_limit_bytes()
        limit_gb = limit / GB if limit else None
    peak = peak if isinstance(peak, Peak) else Peak.exact(peak)
    low, high = peak.low_gb, peak.high_gb
    if low is None and high is None:
        return (
            f"{how} (peak memory unknown: out of memory, or stopped by another process; see "
            "`dmesg`)"
        )
    of = f" of {limit_gb:.1f} GB" if limit_gb else ""
    near = NEAR_LIMIT * limit_gb if limit_gb else 0.0
    at_least = "" if low == high else "at least "
    if low is not None and (not limit_gb or low >= near):
        return f"{how} (likely out of memory: peak {at_least}{low:.1f} GB{of})"
    at_most = "" if low == high else "at most "
    if high is not None and high < near:
        return (
            f"{how} (peak {at_most}{high:.1f} GB{of}: far from the memory limit, so not out of "
            f"memory; stopped by another process, a user or a watchdog?)"
        )
    span = f"at least {low:.1f} GB" if high is None else f"between {low or 0:.1f} and {high:.1f} GB"
    return (
        f"{how} (perhaps out of memory: peak {span}{of}; the child's own peak is not known more "
        f"closely; see `dmesg`)"
    )
