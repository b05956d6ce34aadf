"""kit.measure.power.nvml: the sampler reads the run's board (found by PCI bus id), never the sum of
all."""

from __future__ import annotations

import time

import pytest
from gpu_fakes import FakeHost, four_boards, install

from kit.measure.power import PowerMonitor, SamplerOptions, select_sampler
from kit.measure.power.nvml import MIN_WINDOW_S, NvmlSampler
from kit.measure.power.summary import COUNTER, INTEGRAL


@pytest.fixture
def host(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    return install(monkeypatch, FakeHost(four_boards()))


def read_once(options: SamplerOptions | None = None) -> tuple[NvmlSampler, float]:
    sampler = select_sampler("cuda", options)
    assert isinstance(sampler, NvmlSampler), sampler.probe()
    sampler.open()
    watts = sampler.read().watts
    sampler.close()
    return sampler, watts


def test_default_is_cuda_device_0_in_pci_order_not_nvml_index_0(host):
    # CUDA ordinal 0 is the lowest PCI bus id (01:00.0), which NVML calls index 1 (100 W);
    # NVML index 0 (81:00.0, 300 W) or the sum of all boards (750 W) would be wrong.
    sampler, watts = read_once()
    assert watts == pytest.approx(100.0)
    assert "CUDA device 0" in sampler.sensor and "00000000:01:00.0" in sampler.sensor
    assert "NVML index 1" in sampler.sensor and host.init == 0


@pytest.mark.parametrize(
    ("visible", "ordinal", "bus", "watts"),
    [
        ("2,0", 0, "00000000:41:00.0", 205.0),  # third board in PCI order; it offers instant power
        ("2,0", 1, "00000000:01:00.0", 100.0),
        ("3", 0, "00000000:81:00.0", 300.0),
        ("GPU-0003", 0, "00000000:21:00.0", 150.0),  # by UUID: NVML index 3
    ],
)
def test_cuda_visible_devices_picks_the_board(host, monkeypatch, visible, ordinal, bus, watts):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    sampler, read = read_once(SamplerOptions(cuda_device=ordinal))
    assert read == pytest.approx(watts) and bus in sampler.sensor


def test_instant_power_where_nvml_offers_it(host, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2")
    sampler, watts = read_once()
    # the field, not the 1 s average (200 W)
    assert sampler.instant and watts == pytest.approx(205.0)
    assert sampler.sensor.startswith(
        "NVML NVML_FI_DEV_POWER_INSTANT + nvmlDeviceGetTotalEnergyConsumption"
    )
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    plain, _ = read_once()  # board 01:00.0 has no instant field
    assert not plain.instant and any("1 s average" in n for n in plain.notes)


def test_energy_is_the_counter_difference_of_that_board_only(host):
    sampler = select_sampler("cuda")
    sampler.open()
    for b in host.boards:
        b.energy_mj += 12_500 * (b.nvml_index + 1)
    assert sampler.read().energy_j == pytest.approx(25.0)  # NVML index 1: 2 x 12.5 J
    sampler.close()


def test_short_window_is_marked_below_the_sensor_resolution(host):
    host.energy_supported = False
    with PowerMonitor(select_sampler("cuda"), hz=50) as mon:
        time.sleep(0.1)
    s = mon.summary(100)
    assert (
        s.method == "measured" and s.energy_method == INTEGRAL and s.mean_w == pytest.approx(100.0)
    )
    assert any(
        n.startswith("below the sensor's resolution") and f"{MIN_WINDOW_S:g} s" in n
        for n in s.notes
    )


def test_long_window_carries_no_resolution_note(host, monkeypatch):
    clock = iter([0.0, MIN_WINDOW_S + 1])
    monkeypatch.setattr("kit.measure.power.nvml.time.perf_counter", lambda: next(clock))
    sampler = select_sampler("cuda")
    sampler.open()
    sampler.close()
    assert not any("resolution" in n for n in sampler.notes)


def test_explicit_nvml_indices_are_summed_and_named(host):
    sampler, watts = read_once(SamplerOptions(devices=(0, 3)))
    assert watts == pytest.approx(450.0) and "NVML index 0 + NVML index 3" in sampler.sensor


def test_a_cuda_device_that_is_not_there(host, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    sampler = select_sampler("cuda", SamplerOptions(cuda_device=1))
    assert not sampler.available
    assert (
        "CUDA device 1 unavailable: this process sees 1 GPU(s) (CUDA_VISIBLE_DEVICES='1')"
        in sampler.reason
    )
    assert host.init == 0  # NVML shut down again
    assert "lists 4 GPU(s)" in select_sampler("cuda", SamplerOptions(devices=(5,))).reason


def test_counter_unsupported_integrates_power(host):
    host.energy_supported = False
    with PowerMonitor(select_sampler("cuda"), hz=50) as mon:
        time.sleep(0.05)
    assert mon.summary().energy_method == INTEGRAL
    host.energy_supported = True
    with PowerMonitor(select_sampler("cuda"), hz=50) as mon:
        time.sleep(0.05)
    assert mon.summary().energy_method == COUNTER
