import json
import os
import stat
import sys
import textwrap
import time
import types
from pathlib import Path

import pytest

from kit.backends.base import Session
from kit.errors import InvalidParameter, UnknownNameError
from kit.measure import power
from kit.measure.power import (
    PowerMonitor,
    PowerSampler,
    PowerSummary,
    Reading,
    SamplerOptions,
    SensorError,
    UnavailableSampler,
    enable_ipu_monitoring,
    make_sampler,
    sampler_for,
    select_sampler,
)
from kit.measure.power import ipu as ipu_mod
from kit.measure.power import rapl as rapl_mod
from kit.measure.power.base import Series
from kit.measure.power.summary import COUNTER
from kit.measure.window import BatchMeasurement, MeasureConfig, measure, timed_window
from kit.studies.model_benchmark import Config

# ---------------------------------------------------------------- test doubles


class FakeSampler(PowerSampler):
    """Power as a function of seconds since open(); counts reads."""

    name = "fake"

    def __init__(self, profile=lambda t: 100.0):
        super().__init__()
        self.profile, self.reads, self.t0 = profile, 0, None

    @property
    def sensor(self):
        return "fake sensor"

    def probe(self):
        return None

    def open(self):
        self.t0 = time.perf_counter()

    def read(self):
        self.reads += 1
        return Reading(watts=self.profile(time.perf_counter() - self.t0))


class SleepSession(Session):
    description = {"backend": "sleep"}

    def __init__(self):
        self.calls = 0

    def run(self, inputs):
        return []

    def bind(self, inputs):
        def call():
            self.calls += 1
            time.sleep(0.002)

        return call


def make_zone(
    root: Path, index: int, name: str, energy_uj: int, max_uj: int = 262_143_328_850
) -> Path:
    zone = root / f"intel-rapl:{index}"
    zone.mkdir(parents=True)
    (zone / "name").write_text(name + "\n")
    (zone / "energy_uj").write_text(f"{energy_uj}\n")
    (zone / "max_energy_range_uj").write_text(f"{max_uj}\n")
    return zone


@pytest.fixture
def powercap(tmp_path):
    """A powercap tree: two packages, psys (contains them: excluded), and a core subzone."""
    root = tmp_path / "powercap"
    (root / "intel-rapl").mkdir(parents=True)  # the control-type directory, not a zone
    make_zone(root, 0, "package-0", 900_000, max_uj=1_000_000)
    make_zone(root, 1, "package-1", 5_000_000)
    make_zone(root, 2, "psys", 70_000_000)
    sub = root / "intel-rapl:0:0"
    sub.mkdir()
    (sub / "name").write_text("core\n")
    return root


def set_uj(root: Path, index: int, value: int) -> None:
    (root / f"intel-rapl:{index}" / "energy_uj").write_text(f"{value}\n")


# ---------------------------------------------------------------- RAPL


def test_rapl_sums_packages_and_handles_a_counter_wrap(powercap):
    sampler = select_sampler("cpu", SamplerOptions(powercap_root=powercap))
    assert sampler.name == "rapl"
    sampler.open()
    assert sampler.sensor.startswith("RAPL package-0+package-1")
    set_uj(powercap, 0, 950_000)  # +50 000 uJ
    set_uj(powercap, 1, 5_300_000)  # +300 000 uJ
    assert sampler.read().energy_j == pytest.approx(0.35)
    set_uj(powercap, 0, 100_000)  # wrapped at 1 000 000: +150 000 uJ
    set_uj(powercap, 2, 99_000_000)  # psys moves too, but is not summed
    assert sampler.read().energy_j == pytest.approx(0.50)


def test_rapl_zone_names_are_configurable(powercap):
    sampler = make_sampler("rapl", SamplerOptions(powercap_root=powercap, rapl_zones=("psys",)))
    assert sampler.probe() is None
    assert sampler.sensor.startswith("RAPL psys")
    dram = powercap / "intel-rapl:0:2"  # a subzone, flat in the class directory like the kernel's
    dram.mkdir()
    (dram / "name").write_text("dram\n")
    (dram / "energy_uj").write_text("10\n")
    (dram / "max_energy_range_uj").write_text("65712999613\n")
    with_dram = make_sampler(
        "rapl", SamplerOptions(powercap_root=powercap, rapl_zones=("package", "dram"))
    )
    with_dram.open()
    (dram / "energy_uj").write_text("1000010\n")
    assert sorted(z.name for z in with_dram.zones) == ["dram", "package-0", "package-1"]
    assert with_dram.read().energy_j == pytest.approx(1.0)


def test_rapl_permission_denied_is_the_reason(powercap, monkeypatch):
    target = powercap / "intel-rapl:1" / "energy_uj"
    target.chmod(0)
    if os.geteuid() == 0:  # root reads mode-000 files; make the read fail as the kernel does
        real = rapl_mod._read_text

        def denied(path):
            if path == target:
                raise PermissionError(13, "Permission denied", str(path))
            return real(path)

        monkeypatch.setattr(rapl_mod, "_read_text", denied)
    sampler = select_sampler("cpu", SamplerOptions(powercap_root=powercap))
    assert not sampler.available
    assert f"permission denied on {target}" in sampler.reason
    target.chmod(stat.S_IRUSR | stat.S_IWUSR)


def test_rapl_missing_tree_and_empty_tree(tmp_path):
    missing = make_sampler("rapl", SamplerOptions(powercap_root=tmp_path / "nope"))
    assert "no powercap interface on this machine" in missing.probe()
    (tmp_path / "empty").mkdir()
    empty = make_sampler("rapl", SamplerOptions(powercap_root=tmp_path / "empty"))
    assert "no RAPL zones" in empty.probe()


def test_rapl_through_the_monitor_gives_energy_by_counter_difference(powercap):
    sampler = make_sampler("rapl", SamplerOptions(powercap_root=powercap))
    with PowerMonitor(sampler, hz=50) as mon:
        set_uj(powercap, 1, 5_000_000 + 2_000_000)  # 2 J during the window
        time.sleep(0.1)
    s = mon.summary(samples_processed=40)
    assert s.method == "measured" and s.energy_method == COUNTER
    assert s.energy_j == pytest.approx(2.0)
    assert s.samples_per_j == pytest.approx(20.0)
    assert s.mean_w == pytest.approx(2.0 / s.duration_s)
    assert len(s.series_w) == s.n_samples - 1  # power from counter differences


# ---------------------------------------------------------------- this machine


def test_the_real_unavailable_path_on_this_machine():
    if Path("/sys/class/powercap").exists():
        pytest.skip("this machine has a powercap tree")
    sampler = select_sampler("cpu")
    assert isinstance(sampler, UnavailableSampler)
    assert (
        sampler.reason
        == "rapl: no powercap interface on this machine (/sys/class/powercap missing)"
    )
    m = SleepSession().measure_window(
        {}, 2, MeasureConfig(warmup=1, min_duration_s=0.02, min_count=3), sampler
    )
    assert m.power["method"] == "unavailable"
    assert "no powercap interface" in m.power["reason"]
    assert m.power["mean_w"] is None and m.power["samples_per_j"] is None  # never a guess
    assert m.power["samples_processed"] == m.samples


def test_nvml_is_unavailable_without_a_driver():
    if Path("/dev/nvidiactl").exists():
        pytest.skip("an NVIDIA driver is present")
    sampler = select_sampler("cuda")
    assert not sampler.available and sampler.reason.startswith("nvml: NVML unavailable")


# NVML: tests/measure/test_nvml.py (a fake NVML with several boards and shuffled indices)


# ---------------------------------------------------------------- gcipuinfo test double


def fake_gcipuinfo_module(boards):
    """A `gcipuinfo` double: without setUpdateMode(True), getDevices() returns stale data."""

    class gcipuinfo:  # noqa: N801 - the SDK's class name
        def __init__(self):
            self.update, self.calls, self.snapshot = False, 0, self._devices()

        def setUpdateMode(self, on):  # noqa: N802 - SDK method name
            self.update = bool(on)

        def _devices(self):
            return [dict(d) for d in boards]

        def getDevices(self):  # noqa: N802
            self.calls += 1
            if self.update:
                self.snapshot = self._devices()
            return self.snapshot

    return types.SimpleNamespace(gcipuinfo=gcipuinfo)


def c2_devices(w0="113.7W", w1="80.0W"):
    """Two C2 cards, two IPUs each: every IPU reports its card's board power."""
    return [
        {
            "id": "0",
            "board serial number": "0340.0004.919062",
            "total board power": w0,
            "ipu power": "N/A",
        },
        {
            "id": "1",
            "board serial number": "0340.0004.919062",
            "total board power": w0,
            "ipu power": "N/A",
        },
        {
            "id": "2",
            "board serial number": "0340.0002.919063",
            "total board power": w1,
            "ipu power": "N/A",
        },
        {
            "id": "3",
            "board serial number": "0340.0002.919063",
            "total board power": w1,
            "ipu power": "N/A",
        },
    ]


def test_gcipuinfo_counts_each_board_once_and_updates(monkeypatch):
    boards = c2_devices()
    monkeypatch.setitem(sys.modules, "gcipuinfo", fake_gcipuinfo_module(boards))
    sampler = select_sampler("ipu")
    assert sampler.name == "gcipuinfo"
    sampler.open()
    assert sampler.read().watts == pytest.approx(193.7)
    boards[0]["total board power"] = boards[1]["total board power"] = "150.0W"
    assert sampler.read().watts == pytest.approx(230.0)  # update mode on: fresh values


def test_gcipuinfo_device_filter_and_na(monkeypatch):
    boards = c2_devices(w1="N/A")
    monkeypatch.setitem(sys.modules, "gcipuinfo", fake_gcipuinfo_module(boards))
    only_first = make_sampler("gcipuinfo", SamplerOptions(devices=(0, 1)))
    only_first.open()
    assert only_first.read().watts == pytest.approx(113.7)
    second = make_sampler("gcipuinfo", SamplerOptions(devices=(2,)))
    assert second.probe() is None  # present; N/A until the measured process monitors
    second.open()
    with pytest.raises(SensorError, match="N/A .*GCDA_MONITOR=1"):
        second.read()


def test_enable_ipu_monitoring_sets_and_records(monkeypatch):
    monkeypatch.delenv("GCDA_MONITOR", raising=False)
    monkeypatch.setattr(ipu_mod, "_monitoring_record", [])
    assert "not set" in ipu_mod.monitoring_note()
    child_env = {"PATH": "/bin"}
    enable_ipu_monitoring(child_env)
    assert child_env["GCDA_MONITOR"] == "1" and "GCDA_MONITOR" not in os.environ
    note = enable_ipu_monitoring()
    assert os.environ["GCDA_MONITOR"] == "1" and note.endswith("(was unset)")
    monkeypatch.setitem(sys.modules, "gcipuinfo", fake_gcipuinfo_module(c2_devices()))
    with PowerMonitor(make_sampler("gcipuinfo"), hz=20) as mon:
        time.sleep(0.06)
    assert mon.summary().notes == [
        "GCDA_MONITOR=1 set by kit.measure.power (was unset) in this process's environment"
    ]


# ---------------------------------------------------------------- gc-monitor / gc-info executables

GC_INFO_TEXT = """\
Device Info:
  id: {id}
  target: PCIe
  average board temp: 36.2 C
  board ipu index: {id}
  board serial number: 0340.0004.919062
  board type: C2
  clock: 1300MHz
  ipu architecture: ipu1
  pci id: 0000:1a:00.0
  total board power: 99.5 W
  user executable: gc-hosttraffictest
  user process id: 38641
"""


def put_on_path(monkeypatch, bin_dir: Path, name: str, script: str) -> None:
    bin_dir.mkdir(exist_ok=True)
    exe = bin_dir / name
    exe.write_text(f"#!{sys.executable}\n" + textwrap.dedent(script))
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin")


def test_gc_info_fallback_parses_the_documented_output(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "gcipuinfo", None)  # the library is not importable
    log = tmp_path / "argv.log"
    put_on_path(
        monkeypatch,
        tmp_path / "bin",
        "gc-info",
        f"""
        import sys
        open({str(log)!r}, "a").write(" ".join(sys.argv[1:]) + "\\n")
        assert sys.argv[1:4:2] == ["-d", "-i"], sys.argv
        print({GC_INFO_TEXT!r}.format(id=sys.argv[2]))
        """,
    )
    sampler = select_sampler("ipu", SamplerOptions(devices=(0, 1)))
    assert sampler.name == "gc-cli" and "gc-info -d N -i" in sampler.sensor
    sampler.open()
    assert sampler.read().watts == pytest.approx(99.5)  # IPUs 0 and 1 share one C2 board
    assert "-d 0 -i" in log.read_text() and "-d 1 -i" in log.read_text()


def test_no_ipu_interface_collects_both_reasons(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "gcipuinfo", None)
    monkeypatch.setenv("PATH", str(tmp_path))
    sampler = select_sampler("ipu")
    assert "gcipuinfo: gcipuinfo unavailable" in sampler.reason
    assert "gc-cli: Graphcore command line tools unavailable" in sampler.reason


# ---------------------------------------------------------------- monitor thread and summaries


def test_thread_reaches_at_least_10_hz_with_a_fast_sensor():
    sampler = FakeSampler()
    with PowerMonitor(sampler, hz=50) as mon:
        time.sleep(0.5)
    s = mon.summary()
    assert s.hz_achieved >= 10.0
    assert s.n_samples == sampler.reads and s.hz_requested == 50.0
    assert 0.0 < s.monitor_cpu_s < s.duration_s  # the thread's own CPU time is recorded


def test_energy_of_a_constant_and_a_linear_profile_end_to_end():
    with PowerMonitor(FakeSampler(lambda t: 100.0), hz=40) as mon:
        time.sleep(0.2)
    s = mon.summary(1000)
    assert s.energy_j == pytest.approx(100.0 * s.duration_s)
    assert s.samples_per_s_per_w == pytest.approx(s.samples_per_j)  # same window, same quantity
    with PowerMonitor(FakeSampler(lambda t: 10.0 + 400.0 * t), hz=40) as mon:
        time.sleep(0.2)
    s = mon.summary()
    t0, t1 = s.series_t_s[0], s.series_t_s[-1]
    exact = 10.0 * (t1 - t0) + 200.0 * (t1**2 - t0**2)  # perf_counter skew between clocks < 1%
    assert s.energy_j == pytest.approx(exact, rel=0.02)


def test_integral_is_exact_for_piecewise_linear_samples():
    series = Series()
    for t, w in [(0.0, 0.0), (0.5, 50.0), (1.0, 100.0), (3.0, 100.0)]:  # irregular spacing
        series.append(t, Reading(watts=w))
    s = PowerSummary.from_series(
        series, counter=False, sensor="x", sampler="x", samples_processed=500
    )
    assert s.energy_j == pytest.approx(50.0 + 200.0)
    assert s.mean_w == pytest.approx(250.0 / 3.0) and s.mean_w_samples == pytest.approx(62.5)
    assert s.samples_per_j == pytest.approx(2.0) and (s.min_w, s.max_w) == (0.0, 100.0)


def test_read_errors_are_counted_and_an_all_failing_sensor_is_unavailable():
    class Broken(FakeSampler):
        def read(self):
            raise SensorError("sensor went away")

    with PowerMonitor(Broken(), hz=50) as mon:
        time.sleep(0.05)
    s = mon.summary(10)
    assert s.method == "unavailable" and "sensor went away" in s.reason and s.read_errors >= 2


def test_summary_goes_into_the_measurement_and_round_trips():
    m = timed_window(
        [SleepSession().bind({})],
        4,
        MeasureConfig(warmup=3, min_duration_s=0.1, min_count=5),
        FakeSampler(lambda t: 42.0),
        hz=50,
    )
    p = m.power
    assert p["method"] == "measured" and p["sensor"] == "fake sensor" and p["sampler"] == "fake"
    assert p["samples_processed"] == m.samples
    assert p["samples_per_s"] == pytest.approx(m.throughput)
    assert p["samples_per_s_per_w"] == pytest.approx(m.throughput / 42.0)
    assert abs(p["duration_s"] - m.wall_time_s) < 0.05  # warm-up is outside the window
    again = BatchMeasurement.from_dict(json.loads(json.dumps(m.to_dict())))
    assert PowerSummary.from_dict(again.power).mean_w == pytest.approx(42.0)


def test_measure_loop_is_unchanged_by_an_unavailable_monitor():
    with PowerMonitor(UnavailableSampler(["none here"])) as mon:
        m = measure([lambda: None], 1, MeasureConfig(warmup=0, min_duration_s=0, min_count=5))
    assert m.latency.count == 5 and mon._thread is None


def test_tensorrt_device_selects_the_gpu_sensor_not_an_error():
    """Bug (issue 11): device 'tensorrt' made select_sampler raise InvalidParameter. The kind is now
    settled once, in the study's config, and the sampler is chosen for that kind."""
    cfg = Config(device="tensorrt", precision="int8")
    assert cfg.hardware == "cuda"
    sampler = sampler_for(cfg.hardware, options=SamplerOptions(powercap_root="/nonexistent"))
    assert sampler.name in ("nvml", "unavailable")
    if sampler.name == "unavailable":
        assert "nvml" in sampler.reason and "rapl" not in sampler.reason


def test_bad_parameters_are_rejected():
    with pytest.raises(InvalidParameter, match="hz"):
        PowerMonitor(FakeSampler(), hz=5)
    with pytest.raises(InvalidParameter, match="hardware"):
        select_sampler("tpu")
    with pytest.raises(UnknownNameError, match="known: gc-cli, gcipuinfo, nvml, rapl, unavailable"):
        make_sampler("zeus")
    with pytest.raises(InvalidParameter, match="reason"):
        PowerSummary("unavailable", "none", "x")
    with pytest.raises(InvalidParameter, match="method"):
        PowerSummary("guessed", "none", "x")
    assert sorted(power.SAMPLERS.names()) == ["gc-cli", "gcipuinfo", "nvml", "rapl", "unavailable"]


def test_a_window_shorter_than_the_sensor_resolves_is_flagged():
    class SlowSensor(FakeSampler):
        min_window_s = 10.0

    with PowerMonitor(SlowSensor(), hz=50) as mon:
        time.sleep(0.05)
    s = mon.summary(10)
    assert s.method == "measured" and s.window_resolved is False
    with PowerMonitor(FakeSampler(), hz=50) as mon:
        time.sleep(0.05)
    assert mon.summary(10).window_resolved is None  # no stated minimum


def test_a_sensor_that_needs_a_long_window_gets_one():
    """Every window over a sensor with a stated minimum (NVML: 10 s) lasts at least that long,
    whatever the profile asked, and the measurement says the minimum was raised."""

    class SlowSensor(FakeSampler):
        name = "slow"
        min_window_s = 0.3

    cfg = MeasureConfig(warmup=0, min_duration_s=0.02, min_count=3, max_duration_s=0.05)
    m = timed_window([SleepSession().bind({})], 4, cfg, SlowSensor())
    assert m.power["window_resolved"] is True and m.power["duration_s"] >= 0.3
    assert m.extra["power_window"] == (
        "minimum duration 0.02 s raised to 0.3 s: the power sensor (slow) "
        "resolves no shorter window"
    )
    plain = timed_window([SleepSession().bind({})], 4, cfg, FakeSampler())
    assert "power_window" not in plain.extra and plain.power["duration_s"] < 0.3
    from kit.measure.power.nvml import NvmlSampler

    # so a GPU power window lasts >= 10 s where it is stretched
    assert NvmlSampler.min_window_s == 10.0


def test_a_window_not_stretched_for_the_sensor_keeps_its_length_and_its_power_is_indicative():
    """The quick profile (stretch_for_power=False): the window the profile asked for, its power
    labelled indicative, never presented as a resolved figure."""
    from kit.measure.power.summary import indicative

    class SlowSensor(FakeSampler):
        name = "slow"
        min_window_s = 0.3

    cfg = MeasureConfig(
        warmup=0, min_duration_s=0.02, min_count=3, max_duration_s=0.05, stretch_for_power=False
    )
    m = timed_window([SleepSession().bind({})], 4, cfg, SlowSensor())
    assert m.power["duration_s"] < 0.3 and "power_window" not in m.extra
    assert m.power["window_resolved"] is False and indicative(m.power).startswith("indicative only")
