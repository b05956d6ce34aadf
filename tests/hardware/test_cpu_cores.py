"""Physical cores, not SMT siblings: what the backends' default threads and a nominal peak count.

ONNX Runtime's and PyTorch's default thread counts and OpenVINO's LATENCY hint use one thread per
physical core; the kit set one per logical CPU, so on a host with hyper-threads its rows ran twice
the threads a plain user's run does, and its nominal peak counted each core twice.
"""

from __future__ import annotations

import pytest

from kit.backends import BackendConfig, get_backend
from kit.hardware import cpu, environment
from kit.hardware.cpu import physical_cores


def fake_sysfs(root, siblings: dict[int, str], name: str = "core_cpus_list") -> None:
    for number, listed in siblings.items():
        topology = root / f"cpu{number}" / "topology"
        topology.mkdir(parents=True)
        (topology / name).write_text(listed + "\n")


def test_smt_siblings_count_once_and_only_the_usable_cpus_count(tmp_path):
    # 4 cores, 2 threads each: cpu N and N+4 share a core
    fake_sysfs(tmp_path, {n: f"{n % 4},{n % 4 + 4}" for n in range(8)})
    assert physical_cores(list(range(8)), tmp_path) == 4
    assert physical_cores([0, 4], tmp_path) == 1  # both siblings of one core (taskset -c 0,4)
    assert physical_cores([0, 1, 4], tmp_path) == 2
    assert physical_cores([0, 1, 2, 3], tmp_path) == 4


def test_older_kernels_list_siblings_and_ranges_are_read(tmp_path):
    fake_sysfs(tmp_path, {0: "0-1", 1: "0-1", 2: "2-3", 3: "2-3"}, "thread_siblings_list")
    assert physical_cores([0, 1, 2, 3], tmp_path) == 2


def test_without_a_topology_every_usable_cpu_counts(tmp_path):
    fake_sysfs(tmp_path, {0: "0,1"})  # cpu1 has no topology folder
    assert physical_cores([0, 1], tmp_path) == 2
    assert physical_cores([0, 1], tmp_path / "absent") == 2
    (tmp_path / "cpu0" / "topology" / "core_cpus_list").write_text("garbled\n")
    assert physical_cores([0], tmp_path) == 1


def test_this_machine_has_at_least_one_core_per_two_cpus():
    cpus = cpu.our_cpus()
    assert len(cpus) >= environment.usable_cores() >= max(1, len(cpus) // 2)


@pytest.fixture
def one_core_under_two_cpus(monkeypatch):
    """This process's CPUs as if they were two siblings of one core."""
    monkeypatch.setattr(environment, "our_cpus", lambda: [0, 1])
    monkeypatch.setattr(environment, "physical_cores", lambda cpus: 1)


def test_backends_default_to_one_thread_per_physical_core(small, one_core_under_two_cpus):
    torch = pytest.importorskip("torch")
    inputs = small.make_inputs(1)
    ort = get_backend("onnxruntime").load(small, BackendConfig(), 1)
    assert ort.description["threads"] == 1
    ort.run(inputs)
    pytest.importorskip("openvino")
    assert get_backend("openvino").load(small, BackendConfig(), 1).description["threads"] == "1"
    before = torch.get_num_threads()
    try:
        assert get_backend("torch").load(small, BackendConfig(), 1).description["threads"] == 1
        assert (
            get_backend("torch").load(small, BackendConfig(threads=2), 1).description["threads"]
            == 2
        )  # an explicit count is kept
    finally:
        torch.set_num_threads(before)


def test_the_nominal_peak_counts_cores_and_the_provenance_both(
    one_core_under_two_cpus, monkeypatch
):
    one_core = environment.cpu_peak_gflops("fp32")
    assert one_core["method"].endswith("x 1 cores")
    monkeypatch.setattr(environment, "physical_cores", lambda cpus: 2)
    two_cores = environment.cpu_peak_gflops("fp32")["gflops"]
    assert two_cores == pytest.approx(2 * one_core["gflops"], abs=0.15)  # each rounded to 0.1
    monkeypatch.setattr(environment, "physical_cores", lambda cpus: 1)
    captured = environment.capture()["cpu"]
    assert captured["cores"] == 1 and captured["cpus"] == 2
    assert captured["peak_fp32"]["gflops"] == one_core["gflops"]


X86_CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model name\t: Intel(R) Xeon(R) Platinum 8481C
cpu MHz\t\t: 2000.000
flags\t\t: fpu sse avx2 avx512f
vmx flags\t: ept

processor\t: 1
vendor_id\t: GenuineIntel
cpu family\t: 6
model name\t: Intel(R) Xeon(R) Platinum 8481C
cpu MHz\t\t: 2400.500
flags\t\t: fpu sse avx2 avx512f amx_tile
"""


def test_cpuinfo_is_read_by_exact_key_once_per_cpu(tmp_path, monkeypatch):
    (tmp_path / "cpuinfo").write_text(X86_CPUINFO)
    monkeypatch.setattr(cpu, "CPUINFO", tmp_path / "cpuinfo")
    assert cpu.cpuinfo_values("cpu MHz") == ["2000.000", "2400.500"]
    assert cpu.cpuinfo_values("model name") == ["Intel(R) Xeon(R) Platinum 8481C"] * 2
    # "vmx flags" is not "flags"; every CPU's flags count
    assert cpu.cpuinfo_flags() == {"fpu", "sse", "avx2", "avx512f", "amx_tile"}
    environment.cpu_vendor_family.cache_clear()
    try:
        assert environment.cpu_vendor_family() == ("GenuineIntel", 6)
    finally:
        environment.cpu_vendor_family.cache_clear()
    from kit.measure.noise import cpu_mhz

    assert cpu_mhz([1], sys_cpu=tmp_path) == ([2400.5], "/proc/cpuinfo 'cpu MHz'")


def test_arm_features_are_its_flags_and_an_unreadable_cpuinfo_gives_nothing(tmp_path, monkeypatch):
    (tmp_path / "cpuinfo").write_text("processor\t: 0\nFeatures\t: fp asimd sve\n")
    monkeypatch.setattr(cpu, "CPUINFO", tmp_path / "cpuinfo")
    assert cpu.cpuinfo_flags() == {"fp", "asimd", "sve"}
    monkeypatch.setattr(cpu, "CPUINFO", tmp_path / "absent")
    assert cpu.cpuinfo_values("flags") == [] and cpu.cpuinfo_flags() == frozenset()
    from kit.hardware.reuse import cpu_flags_digest

    assert cpu_flags_digest() == "unknown"
