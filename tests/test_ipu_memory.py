"""The PopRT conversion's memory through the poprt double: each step's peak measured in the worker
and set against the 3 x file + 2 GB budget, recorded per host, and checked before the next run's
steps ("needs about N GB, M GB available"), never guessed before a first measurement."""

from __future__ import annotations

import pytest

from kit import step_peaks
from kit.backends import ipu as ipu_mod
from kit.backends import ipu_worker
from kit.backends.ipu import IpuBackend
from kit.memory import InsufficientMemory
from tests.test_ipu_backend import config, tiny_exported, with_double  # noqa: F401 - fixture

STEPS = ("ipu-convert", "ipu-compile")


def test_first_conversion_is_measured_per_step_and_recorded_not_checked(with_double, tmp_path):  # noqa: F811
    model = tiny_exported(tmp_path)
    session = IpuBackend().load(model, config(tmp_path, "fp32"), 2)
    memory = session.description["memory"]
    session.close()
    assert set(memory["steps"]) == set(STEPS) and memory["status"] == "measured"
    for figures in memory["steps"].values():
        assert 10e6 < figures["peak_rss_bytes"] < 2e9  # a Python process with onnx: tens of MB, not GB
        assert figures["need_checked_bytes"] is None and "no earlier measurement" in figures["check"]
    assert memory["model_bytes"] == model.onnx_path.stat().st_size
    assert memory["budget_bytes"] == 3 * memory["model_bytes"] + 2e9 and memory["over_budget"] == []
    assert memory["verdict"].startswith("PopRT memory within") and "not run on an IPU" in memory["verdict"]
    assert "VmHWM" in memory["method"]
    stored = step_peaks.load()
    assert set(stored) == {f"{s} (test double)" for s in STEPS}  # never stands for PopRT's own peaks
    assert stored["ipu-convert (test double)"][0].context == "PopRT 1.4.0+kit.test.double, fp32, batch 2"


def test_a_later_conversion_is_checked_against_the_memory_available(with_double, tmp_path):  # noqa: F811
    model = tiny_exported(tmp_path)
    IpuBackend().load(model, config(tmp_path, "fp32"), 2).close()
    again = IpuBackend().load(model, config(tmp_path, "fp32", cache_dir=str(tmp_path / "other")), 2)
    steps = again.description["memory"]["steps"]
    again.close()
    assert all(f["need_checked_bytes"] > 0 and "check" not in f for f in steps.values())


def test_a_step_that_will_not_fit_fails_before_it_starts_and_says_why(with_double, tmp_path):  # noqa: F811
    model = tiny_exported(tmp_path)
    step_peaks.record("ipu-convert (test double)", step_peaks.Observation("huge", 1000, 10**15, "made up"))
    with pytest.raises(InsufficientMemory, match=r"PopRT worker: ipu-convert needs about [\d.]+ GB, "
                                                 r"[\d.]+ GB available \(\d+.\d x the ONNX file, the highest "
                                                 r"ratio measured on this host \(huge: .*KIT_SKIP_MEMORY_CHECK=1"):
        IpuBackend().load(model, config(tmp_path, "fp32"), 2)
    assert not any(ipu_mod._LIVE)
    with_double.setenv("KIT_SKIP_MEMORY_CHECK", "1")
    tried = IpuBackend().load(model, config(tmp_path, "fp32"), 2)
    tried.close()
    assert tried.description["memory"]["steps"]["ipu-convert"]["check"].endswith("KIT_SKIP_MEMORY_CHECK=1")


def test_a_cached_popef_converts_nothing_and_says_so(with_double, tmp_path):  # noqa: F811
    model = tiny_exported(tmp_path)
    IpuBackend().load(model, config(tmp_path, "fp32"), 2).close()
    cached = IpuBackend().load(model, config(tmp_path, "fp32"), 2)
    memory = cached.description["memory"]
    cached.close()
    assert memory["verdict"] == "not measured: PopEF from the cache: no conversion ran"


def test_the_need_scales_the_worst_measured_ratio_of_large_models(tmp_path):
    path = tmp_path / "peaks.json"
    assert step_peaks.need("ipu-convert", 5e8, path) is None
    step_peaks.record("ipu-convert", step_peaks.Observation("small", 1e6, 4e8, "c"), path)  # 400x: footprint
    assert step_peaks.need("ipu-convert", 5e8, path)["bytes"] == pytest.approx(400 * 5e8)
    step_peaks.record("ipu-convert", step_peaks.Observation("bert", 4e8, 2e9, "c"), path)
    step_peaks.record("ipu-convert", step_peaks.Observation("swin", 8e8, 3.2e9, "c"), path)
    found = step_peaks.need("ipu-convert", 5e8, path)
    assert found["bytes"] == pytest.approx(5 * 5e8) and "bert: 2.00 GB" in found["source"]


def test_worker_step_memory_resets_the_peak_and_refuses_a_known_need_above_available(monkeypatch):
    memory = ipu_worker.StepMemory({"ipu-compile": {"bytes": 1e18, "source": "test"}})
    with memory.step("ipu-convert"):
        held = b"x" * (50 * 10**6)
    assert memory.steps["ipu-convert"]["peak_rss_bytes"] >= 50e6
    del held
    with memory.step("ipu-convert-again"):
        pass
    if memory.reset_everywhere:  # clear_refs lowered the high-water mark to the current RSS
        assert memory.steps["ipu-convert-again"]["peak_rss_bytes"] < memory.steps["ipu-convert"]["peak_rss_bytes"]
    with pytest.raises(ipu_worker.InsufficientMemory, match=r"ipu-compile needs about 1000000000.0 GB"):
        with memory.step("ipu-compile"):
            pass
    monkeypatch.setattr(ipu_worker, "reset_peak_rss", lambda: False)
    unreset = ipu_worker.StepMemory({})
    with unreset.step("x"):
        pass
    assert "could not reset" in unreset.to_dict()["method"]


def test_memory_bench_measures_the_poprt_step_where_the_backend_is_there(with_double, small):  # noqa: F811
    from benchmarks.memory import format_row, ipu_step, ipu_unavailable

    assert ipu_unavailable() is None
    row = {"model": small.name, "step": "ipu", "wall_s": 1.0, **ipu_step(small)}
    assert row["peak_bytes"] > 10e6 and row["model_bytes"] == small.onnx_path.stat().st_size
    line = format_row(row)
    assert "ipu-convert" in line and "ipu-compile" in line and "[not run on an IPU]" in line and " ok " in line
    with_double.setenv("KIT_IPU_PYTHON", "/nonexistent/python3.8")
    ipu_mod._AVAILABILITY.clear()
    assert "PopRT not installed" in ipu_unavailable()
