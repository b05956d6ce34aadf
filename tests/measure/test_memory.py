"""kit.measure.memory: peak RSS, memory available (from a fake /proc/meminfo and cgroup), the
pre-flight check."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kit.errors import KitError, UnknownNameError
from kit.measure import memory
from kit.measure.memory import (
    GB,
    InsufficientMemory,
    available_bytes,
    check_memory,
    estimate_need,
    parse_meminfo,
)

MEMINFO = """MemTotal:       16384000 kB
MemFree:          512000 kB
MemAvailable:    {available} kB
Buffers:           10240 kB
HugePages_Total:       0
"""


@pytest.fixture
def fake_memory(tmp_path, monkeypatch):
    """A machine with `available` kB free (MemAvailable) and no cgroup limit."""

    def set_available(kilobytes: int):
        path = tmp_path / "meminfo"
        path.write_text(MEMINFO.format(available=kilobytes))
        monkeypatch.setattr(memory, "MEMINFO", path)
        monkeypatch.setattr(memory, "CGROUP", tmp_path / "no-cgroup")
        monkeypatch.delenv(memory.SKIP_CHECK_ENV, raising=False)
        return path

    return set_available


def test_parse_meminfo_in_bytes():
    fields = parse_meminfo(MEMINFO.format(available=4_000_000))
    assert fields["MemAvailable"] == 4_000_000 * 1024 and fields["MemTotal"] == 16384000 * 1024
    assert fields["HugePages_Total"] == 0


def test_available_is_capped_by_a_cgroup_limit(tmp_path, fake_memory):
    meminfo = fake_memory(8_000_000)
    assert available_bytes(meminfo) == 8_000_000 * 1024
    cgroup = tmp_path / "cgroup"
    cgroup.mkdir()
    (cgroup / "memory.max").write_text(f"{3 * 1024**3}\n")
    (cgroup / "memory.current").write_text(f"{1024**3}\n")
    assert available_bytes(meminfo, cgroup) == 2 * 1024**3
    (cgroup / "memory.max").write_text("max\n")
    assert available_bytes(meminfo, cgroup) == 8_000_000 * 1024


def fake_cgroups(tmp_path, self_cgroup: str, files: dict[str, str]):
    """A cgroup filesystem root with `files` (relative path -> content) and a /proc/self/cgroup."""
    root = tmp_path / "sys-fs-cgroup"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (tmp_path / "self-cgroup").write_text(self_cgroup)
    return root, tmp_path / "self-cgroup"


V1_DOCKER = "12:pids:/docker/abc\n4:memory:/docker/abc\n1:name=systemd:/docker/abc\n0::/\n"


def test_a_cgroup_v1_limit_is_seen_as_docker_run_m_gives_it(tmp_path, fake_memory, monkeypatch):
    """Issue 51: under `docker run -m 3g` on a cgroup v1 host the kit counted the host's 24 GB."""
    meminfo = fake_memory(24_000_000)
    # without a cgroup namespace the recorded path is the host's; the mount is the container's own
    root, self_cgroup = fake_cgroups(
        tmp_path,
        V1_DOCKER,
        {
            "memory/memory.limit_in_bytes": f"{3 * GB:.0f}\n",
            "memory/memory.usage_in_bytes": f"{int(0.9 * GB)}\n",
            "memory/memory.stat": f"cache 500\ntotal_inactive_file {int(0.4 * GB)}\n",
        },
    )
    # 3 - (0.9 - 0.4 reclaimable)
    assert available_bytes(meminfo, root, self_cgroup) == int(2.5 * GB)
    assert memory.memory_limit_bytes(meminfo, root, self_cgroup) == 3 * GB
    monkeypatch.setattr(memory, "CGROUP", root)
    monkeypatch.setattr(memory, "SELF_CGROUP", self_cgroup)
    assert "likely out of memory: peak 3.2 GB of 3.0 GB" in memory.oom_message("killed", 3.2)
    with pytest.raises(InsufficientMemory, match="2.5 GB available"):
        check_memory("export-torch", 1 * GB, "exporting swin")


def test_v1_and_v2_limits_at_every_level_above_the_process_count(tmp_path, fake_memory):
    meminfo = fake_memory(24_000_000)
    root, self_cgroup = fake_cgroups(
        tmp_path,
        "0::/user.slice/job\n",
        {
            "user.slice/memory.max": f"{4 * GB:.0f}\n",
            "user.slice/memory.current": f"{1 * GB:.0f}\n",
            "user.slice/job/memory.max": "max\n",
            "user.slice/job/memory.current": "0\n",
        },
    )
    assert available_bytes(meminfo, root, self_cgroup) == 3 * GB
    assert memory.memory_limit_bytes(meminfo, root, self_cgroup) == 4 * GB
    root, self_cgroup = fake_cgroups(
        tmp_path / "v1",
        "5:memory,cpu:/a/b\n",
        {
            "memory/a/memory.limit_in_bytes": f"{2 * GB:.0f}\n",
            "memory/a/memory.usage_in_bytes": "0\n",
            "memory/a/b/memory.limit_in_bytes": "9223372036854771712\n",
            "memory/a/b/memory.usage_in_bytes": "0\n",
        },
    )
    assert available_bytes(meminfo, root, self_cgroup) == 2 * GB
    assert (
        memory.cgroup_limits(root, self_cgroup)[0].where
        == root / "memory/a/b/memory.limit_in_bytes"
    )


def test_check_memory_fails_before_the_step_with_the_figures(fake_memory):
    fake_memory(2_000_000)  # ~2 GB available
    need = estimate_need("int8-static", 1 * GB)
    with pytest.raises(InsufficientMemory) as caught:
        check_memory("int8-static", 1 * GB, "converting swin.onnx to int8")
    message = str(caught.value)
    assert (
        f"converting swin.onnx to int8 needs about {need / GB:.1f} GB, 2.0 GB available" in message
    )
    assert memory.SKIP_CHECK_ENV in message
    assert isinstance(caught.value, KitError) and isinstance(caught.value, MemoryError)


def test_check_memory_passes_when_it_fits_or_is_skipped(fake_memory, monkeypatch):
    fake_memory(64_000_000)
    assert check_memory("fp16", 0.5 * GB, "x") == pytest.approx(estimate_need("fp16", 0.5 * GB))
    fake_memory(100_000)
    monkeypatch.setenv(memory.SKIP_CHECK_ENV, "1")
    check_memory("fp16", 0.5 * GB, "x")


def test_need_grows_with_model_size_and_unknown_steps_are_named():
    assert estimate_need("export-torch", 2 * GB) > estimate_need("export-torch", 1 * GB)
    with pytest.raises(UnknownNameError, match="int4"):
        estimate_need("int4", GB)


PROBE = """
import json, subprocess, sys
from kit.measure.memory import own_peak_rss_bytes, resources
start = own_peak_rss_bytes()
block = bytearray(300 * 2**20)  # zero-filled: every page touched
own = own_peak_rss_bytes()
del block
subprocess.run([sys.executable, "-c", "bytearray(400 * 2**20)"], check=True)
print(json.dumps({"start": start, "own": own, **resources().to_dict()}))
"""


def test_peak_rss_of_this_process_and_its_children():
    import json
    import subprocess
    import sys

    out = json.loads(
        subprocess.run(
            [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True
        ).stdout
    )
    mib = 2**20
    assert out["own"] - out["start"] >= 250 * mib  # the process's own allocation
    assert out["peak_rss_self_bytes"] >= out["own"] - mib  # VmHWM: per-CPU counters, kB jitter
    assert out["peak_rss_children_bytes"] >= 380 * mib  # the child's, seen after it was waited for
    assert out["peak_rss_bytes"] == max(out["peak_rss_self_bytes"], out["peak_rss_children_bytes"])


STEADY_ROUNDS = """
import resource, sys
import numpy as np
if sys.argv[1] == "steady":
    from kit.measure.memory import steady_allocator
    print(steady_allocator())
def call():  # ten 4 MiB activations, written, then freed, as one model call does
    held = [np.ones(1 << 19) for _ in range(10)]
    del held
call()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    call()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_steady_allocator_stops_every_call_from_faulting_its_activations_in_again():
    """glibc's default trims the freed activations after each call, so the next call faults them in
    again (about 100k minor faults over 20 calls here); with the thresholds fixed, none."""

    def faults(mode: str) -> tuple[int, str]:
        out = subprocess.run(
            [sys.executable, "-c", STEADY_ROUNDS, mode], capture_output=True, text=True, check=True
        ).stdout.split("\n")
        return int(out[-2]), out[0]

    default, _ = faults("default")
    steady, note = faults("steady")
    assert default > 20 * 10 * 1000 / 4  # at least a quarter of the 10 x 4 MiB pages, every call
    assert steady < 1000 and "mmap threshold 32 MiB and trim threshold 64 MiB fixed" in note


def test_a_child_s_peak_is_its_own_not_the_parent_s_it_was_spawned_from(monkeypatch):
    """CI: an export child killed at 0.2 GB read 'peak 1.7 GB', the test process's RSS that wait4's
    ru_maxrss counts at the spawn; on a 0.3 GB machine that said 'likely out of memory' for a
    parent's size."""
    monkeypatch.setattr(memory, "own_peak_rss_bytes", lambda: int(1.7 * GB))
    # above: the child's
    assert memory.child_peak(int(2.5 * GB), int(1.0 * GB)) == memory.Peak(2.5, 2.5)
    peak = memory.child_peak(int(1.7 * GB), int(0.2 * GB))
    assert peak == memory.Peak(0.2, 1.7)
    assert "likely out of memory: peak at least 0.2 GB of 0.3 GB" in memory.oom_message(
        "killed", peak, 0.3
    )
    assert "peak at most 1.7 GB of 24.0 GB: far from the memory limit" in memory.oom_message(
        "killed", peak, 24.0
    )
    unsure = memory.oom_message("killed", memory.child_peak(int(1.7 * GB), int(0.05 * GB)), 2.0)
    assert "perhaps out of memory: peak between 0.1 and 1.7 GB of 2.0 GB" in unsure
    assert "likely" not in memory.oom_message("killed", memory.child_peak(int(1.7 * GB)), 2.0)


def test_a_peak_reset_is_believed_only_where_the_peak_fell(tmp_path):
    """The warm kernel resets its VmHWM before each job: a system that takes the write to
    clear_refs and keeps the old peak must not pass for one that reset it."""
    clear_refs, status = tmp_path / "clear_refs", tmp_path / "status"
    clear_refs.write_text("")
    status.write_text("VmHWM:\t 1069000 kB\nVmRSS:\t  500000 kB\n")
    assert memory.reset_peak(clear_refs, status) is False
    assert clear_refs.read_text() == "5"
    status.write_text("VmHWM:\t  500100 kB\nVmRSS:\t  500000 kB\n")
    assert memory.reset_peak(clear_refs, status) is True
    assert memory.reset_peak(tmp_path / "no" / "clear_refs", status) is False
    assert memory.reset_peak(clear_refs, tmp_path / "no-status") is False


def test_resources_say_when_a_warm_kernel_ran_earlier_jobs(monkeypatch):
    monkeypatch.delenv(memory.WARM_ENV, raising=False)
    assert "warm" not in memory.resources().to_dict()["method"]
    monkeypatch.setenv(memory.WARM_ENV, "reset")
    assert "VmHWM reset before this job" in memory.resources().to_dict()["method"]
    monkeypatch.setenv(memory.WARM_ENV, "since-start")
    assert "both figures since the kernel started" in memory.resources().to_dict()["method"]


def test_a_warm_job_counts_the_children_s_peak_only_where_its_own_child_raised_it(monkeypatch):
    """getrusage's children figure is never reset: in a warm kernel the earlier jobs' largest
    child (an export) must not become this job's peak."""
    monkeypatch.setattr(memory, "own_peak_rss_bytes", lambda: 500_000_000)
    monkeypatch.setattr(memory, "_maxrss_bytes", lambda who: 800_000_000)
    monkeypatch.setenv(memory.WARM_ENV, "reset")
    monkeypatch.setattr(memory, "_CHILDREN_AT_JOB_START", [800_000_000])  # an earlier job's
    earlier = memory.resources().to_dict()
    assert earlier["peak_rss_bytes"] == 500_000_000
    assert earlier["peak_rss_children_bytes"] == 800_000_000  # kept, labelled
    assert "the children's figure is not this job's" in earlier["method"]
    monkeypatch.setattr(memory, "_CHILDREN_AT_JOB_START", [100_000_000])  # this job's child
    assert memory.resources().to_dict()["peak_rss_bytes"] == 800_000_000
    monkeypatch.delenv(memory.WARM_ENV)  # a kernel of its own: every child is this job's
    assert memory.resources().to_dict()["peak_rss_bytes"] == 800_000_000


def test_the_index_marks_a_peak_a_warm_kernel_measured(monkeypatch):
    """A warm row's peak counts from what earlier rows left in the kernel: the index's memory
    column says so, beside a peak measured in a kernel of its own."""
    from types import SimpleNamespace

    from kit.publish.site import peak_memory

    monkeypatch.setattr(memory, "own_peak_rss_bytes", lambda: 1_450_000_000)
    monkeypatch.setattr(memory, "_maxrss_bytes", lambda who: 100_000_000)
    monkeypatch.delenv(memory.WARM_ENV, raising=False)
    cold = memory.resources()
    monkeypatch.setenv(memory.WARM_ENV, "reset")
    warm = memory.resources()
    assert not cold.in_warm_kernel and warm.in_warm_kernel
    assert peak_memory(SimpleNamespace(resources=cold)) == "1.4 GB"
    assert peak_memory(SimpleNamespace(resources=warm)) == "1.4 GB (warm kernel)"
    assert type(warm).from_dict(warm.to_dict()).in_warm_kernel  # read back from the JSON
