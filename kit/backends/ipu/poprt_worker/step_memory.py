"""Memory of the worker's conversion and compilation: each step's VmHWM, and a check before a step
whose need the kit knows."""

import os
import time
from contextlib import contextmanager


class StepWontFit(MemoryError):
    """A step's known need is above the memory available (the kit reads it from the reply's
    error name and raises its own error)."""


MEMORY_METHOD = (
    "VmHWM of the PopRT worker (/proc/self/status), reset before each step through "
    "/proc/self/clear_refs"
)


def status_bytes(field, status="/proc/self/status"):
    """A memory line of this process's status (VmHWM: peak resident set, VmRSS: now) in bytes, or
    None where /proc is unreadable."""
    try:
        with open(status) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def vm_hwm_bytes(status="/proc/self/status"):
    return status_bytes("VmHWM", status)


def reset_vm_hwm(clear_refs="/proc/self/clear_refs", status="/proc/self/status"):
    """Reset VmHWM to the current RSS (Linux 4.0 and later). False where that is not allowed, or
    where the write is taken but the peak stays above the current RSS (some sandboxed kernels)."""
    try:
        with open(clear_refs, "w") as f:
            f.write("5")
    except OSError:
        return False
    peak, now = status_bytes("VmHWM", status), status_bytes("VmRSS", status)
    return peak is None or now is None or peak - now <= RESET_SLACK_BYTES


# What RSS may fall between the reset and the read of the status that checks it.
RESET_SLACK_BYTES = 4 * 2**20


# The container's own cgroup: (limit, usage, memory.stat, its reclaimable page-cache fields) of
# cgroup v2 and of v1's memory controller, as kit.measure.memory reads them.
CGROUP_FILES = (
    ("memory.max", "memory.current", "memory.stat", ("inactive_file",)),
    (
        os.path.join("memory", "memory.limit_in_bytes"),
        os.path.join("memory", "memory.usage_in_bytes"),
        os.path.join("memory", "memory.stat"),
        ("total_inactive_file", "inactive_file"),
    ),
)


def reclaimable_bytes(stat, names):
    """The first of `names` in a cgroup's memory.stat (page cache the kernel reclaims before it
    kills), in bytes; 0 where absent."""
    try:
        with open(stat) as f:
            fields = dict(line.split()[:2] for line in f if len(line.split()) >= 2)
    except OSError:
        return 0
    for name in names:
        if fields.get(name, "").isdigit():
            return int(fields[name])
    return 0


def available_memory_bytes(meminfo="/proc/meminfo", cgroup="/sys/fs/cgroup"):
    """MemAvailable, capped by the PopRT container's cgroup limit (v2 or v1); None where
    unreadable."""
    available = None
    try:
        with open(meminfo) as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    available = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    for limit_file, usage_file, stat_file, reclaimable in CGROUP_FILES:
        try:
            with open(os.path.join(cgroup, limit_file)) as f:
                limit = f.read().strip()
            with open(os.path.join(cgroup, usage_file)) as f:
                used = int(f.read().strip())
        except (OSError, ValueError):
            continue
        used = max(used - reclaimable_bytes(os.path.join(cgroup, stat_file), reclaimable), 0)
        if limit.isdigit() and available is not None:
            available = min(available, max(int(limit) - used, 0))
    return available


class StepMemory:
    """Each step's peak RSS (VmHWM reset before it) and RSS before it; before a step whose need the
    kit knows (what the step added on an earlier run: its peak less the RSS before it), compared
    with the memory available, StepWontFit when that is less."""

    def __init__(self, needs):
        self.needs = needs  # step -> {"bytes": need, "source": how it is known}
        self.steps = {}
        self.reset_everywhere = True

    def check(self, step):
        need = self.needs.get(step)
        available = available_memory_bytes()
        if need is not None and available is not None and need["bytes"] > available:
            raise StepWontFit(
                "{} needs about {:.1f} GB, {:.1f} GB available ({})".format(
                    step, need["bytes"] / 1e9, available / 1e9, need["source"]
                )
            )
        return available

    @contextmanager
    def step(self, name):
        available = self.check(name)
        self.reset_everywhere = reset_vm_hwm() and self.reset_everywhere
        before = status_bytes("VmRSS")
        started = time.perf_counter()
        yield
        checked = (self.needs.get(name) or {}).get("bytes") if available is not None else None
        self.steps[name] = {
            "peak_rss_bytes": vm_hwm_bytes(),
            "rss_before_bytes": before,
            "seconds": round(time.perf_counter() - started, 2),
            "available_before_bytes": available,
            "need_checked_bytes": checked,
        }

    def to_dict(self):
        method = (
            MEMORY_METHOD
            if self.reset_everywhere
            else (
                "VmHWM of the PopRT worker (/proc/self/status); /proc/self/clear_refs could not "
                "reset it, so each step's peak is the worker's peak since it started"
            )
        )
        return {"status": "measured", "steps": self.steps, "method": method}
