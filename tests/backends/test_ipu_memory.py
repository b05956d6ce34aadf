"""The PopRT conversion's memory through the poprt double: each step's peak measured in the worker
and set against the 3 x file + 2 GB budget, recorded per host, and checked before the next run's
steps ("needs about N GB, M GB available"), never guessed before a first measurement."""

from __future__ import annotations

import mmap

import pytest

from kit.backends import step_peaks
from kit.backends.ipu import IpuBackend
from kit.backends.ipu import backend as ipu_mod
from kit.backends.ipu.poprt_worker import step_memory
from kit.measure.memory import InsufficientMemory

# fixture
from tests.backends.test_ipu_backend import config, tiny_exported, with_double  # noqa: F401

STEPS = ("ipu-convert", "ipu-compile")


def test_first_conversion_is_measured_per_step_and_recorded_not_checked(with_double, tmp_path):  # noqa: F811
    model = tiny_exported(tmp_path)
    session = IpuBackend().load(model, config(tmp_path, "fp32"), 2)
    memory = session.description["memory"]
    session.close()
    assert set(memory["steps"]) == set(STEPS) and memory["status"] == "measured"
    for figures in memory["steps"].values():
        # a Python process with onnx: tens of MB, not GB
        assert 10e6 < figures["peak_rss_bytes"] < 2e9
        assert 0 < figures["rss_before_bytes"] <= figures["peak_rss_bytes"]
        assert (
            figures["need_checked_bytes"] is None
            and "no measurement of this model" in figures["check"]
        )
    assert memory["model_bytes"] == model.onnx_path.stat().st_size
    assert memory["budget_bytes"] == 3 * memory["model_bytes"] + 2e9 and memory["over_budget"] == []
    assert (
        memory["verdict"].startswith("PopRT memory within")
        and "not run on an IPU" in memory["verdict"]
    )
    assert "VmHWM" in memory["method"]
    stored = step_peaks.load()
    # never stands for PopRT's own peaks
    assert set(stored) == {f"{s} (test double)" for s in STEPS}
    row = stored["ipu-convert (test double)"][0]
    assert (
        row.context == "PopRT 1.4.0+kit.test.double, fp32, batch 2"
        and 0 <= row.added_bytes <= row.peak_bytes
    )


def test_a_small_model_measured_first_never_blocks_a_larger_one(with_double, tmp_path):  # noqa: F811
    """The reviewer's case: the tiny model's fixed costs (hundreds of thousands x its file) must not
    be scaled up to a 20 MB model and refuse it."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    from kit.models.spec import ExportedModel, InputSpec, WeightsInfo
    from tests.onnx_graphs import save_graph

    IpuBackend().load(tiny_exported(tmp_path), config(tmp_path, "fp32"), 2).close()
    w = numpy_helper.from_array(np.ones((2500, 2000), np.float32), "w")  # 20 MB of weights
    path = save_graph(
        tmp_path / "wide.onnx",
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 2500])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 2000])],
        [w],
        opset=IpuBackend.export_opset,
    )
    wide = ExportedModel(
        name="wide",
        onnx_path=path,
        inputs=(InputSpec("x", (1, 2500), "float32"),),
        outputs=("y",),
        weights=WeightsInfo("random", "seed 0"),
    )
    session = IpuBackend().load(wide, config(tmp_path, "fp32"), 2)
    session.close()
    assert (
        "no measurement of this model"
        in session.description["memory"]["steps"]["ipu-convert"]["check"]
    )


def test_a_later_conversion_is_checked_against_the_memory_available(with_double, tmp_path):  # noqa: F811
    model = tiny_exported(tmp_path)
    IpuBackend().load(model, config(tmp_path, "fp32"), 2).close()
    again = IpuBackend().load(model, config(tmp_path, "fp32", cache_dir=str(tmp_path / "other")), 2)
    steps = again.description["memory"]["steps"]
    again.close()
    assert all(f["need_checked_bytes"] >= 0 and "check" not in f for f in steps.values())


def test_a_step_that_will_not_fit_fails_before_it_starts_and_says_why(with_double, tmp_path):  # noqa: F811
    model = tiny_exported(tmp_path)
    size = model.onnx_path.stat().st_size
    step_peaks.record(
        "ipu-convert (test double)", step_peaks.Observation("tiny", size, 10**15, 10**15, "made up")
    )
    with pytest.raises(
        InsufficientMemory,
        match=r"PopRT worker: ipu-convert needs about 1000000.0 GB, "
        r"[\d.]+ GB available \(what this step added for tiny before "
        r"on this host: 1000000.00 GB, made up\).*KIT_SKIP_MEMORY_CHECK=1",
    ):
        IpuBackend().load(model, config(tmp_path, "fp32"), 2)
    assert not any(ipu_mod._LIVE)
    with_double.setenv("KIT_SKIP_MEMORY_CHECK", "1")
    tried = IpuBackend().load(model, config(tmp_path, "fp32"), 2)
    tried.close()
    assert tried.description["memory"]["steps"]["ipu-convert"]["check"].endswith(
        "KIT_SKIP_MEMORY_CHECK=1"
    )


def test_a_cached_popef_converts_nothing_and_says_so(with_double, tmp_path):  # noqa: F811
    model = tiny_exported(tmp_path)
    IpuBackend().load(model, config(tmp_path, "fp32"), 2).close()
    cached = IpuBackend().load(model, config(tmp_path, "fp32"), 2)
    memory = cached.description["memory"]
    cached.close()
    assert memory["verdict"] == "not measured: PopEF from the cache: no conversion ran"


def test_the_need_is_what_the_step_added_for_this_model_else_scaled_from_models_at_least_half_its_size(  # noqa: E501
    tmp_path,
):
    path = tmp_path / "peaks.json"
    assert step_peaks.need("ipu-convert", "bert", 4e8, path) is None
    # a tiny model's fixed costs (Python, onnx) dwarf its file: never scaled up to a larger model
    step_peaks.record("ipu-convert", step_peaks.Observation("tiny", 300, 6e7, 2e7, "c"), path)
    assert step_peaks.need("ipu-convert", "bert", 4e8, path) is None
    step_peaks.record("ipu-convert", step_peaks.Observation("swin", 8e8, 3.2e9, 2.4e9, "c"), path)
    step_peaks.record("ipu-convert", step_peaks.Observation("roberta", 5e8, 2e9, 1.0e9, "c"), path)
    scaled = step_peaks.need("ipu-convert", "bert", 4e8, path)  # swin 3x, roberta 2x: the worst, 3x
    assert scaled["bytes"] == pytest.approx(3 * 4e8) and "swin: +2.40 GB" in scaled["source"]
    step_peaks.record(
        "ipu-convert", step_peaks.Observation("bert", 4e8, 1.5e9, 0.9e9, "PopRT 1.4.0"), path
    )
    step_peaks.record(
        "ipu-convert", step_peaks.Observation("bert", 4e8, 1.6e9, 1.1e9, "PopRT 1.4.0"), path
    )
    own = step_peaks.need("ipu-convert", "bert", 4e8, path)
    assert own["bytes"] == pytest.approx(1.1e9) and own["source"].startswith(
        "what this step added for bert"
    )


def test_a_store_of_another_format_is_ignored_not_an_error(tmp_path):
    path = tmp_path / "peaks.json"
    path.write_text(
        '{"ipu-convert": [{"model": "old", "model_bytes": 1, "peak_bytes": 2}, 7], "x": 3}'
    )
    assert step_peaks.load(path) == {"ipu-convert": [], "x": []}
    path.write_text("[1, 2]")
    assert step_peaks.load(path) == {} and step_peaks.need("ipu-convert", "m", 1e8, path) is None


def test_worker_step_memory_resets_the_peak_and_refuses_a_known_need_above_available(monkeypatch):
    memory = step_memory.StepMemory({"ipu-compile": {"bytes": 1e18, "source": "test"}})
    with memory.step("ipu-convert"):
        held = mmap.mmap(-1, 50 * 10**6)  # its own mapping: closing it surely returns the pages
        held.write(b"x" * len(held))
    assert memory.steps["ipu-convert"]["peak_rss_bytes"] >= 50e6
    held.close()
    with memory.step("ipu-convert-again"):
        pass
    if memory.reset_everywhere:  # clear_refs lowered the high-water mark to the current RSS
        assert (
            memory.steps["ipu-convert-again"]["peak_rss_bytes"]
            < memory.steps["ipu-convert"]["peak_rss_bytes"]
        )
    with pytest.raises(step_memory.StepWontFit, match=r"ipu-compile needs about 1000000000.0 GB"):
        with memory.step("ipu-compile"):
            pass
    monkeypatch.setattr(step_memory, "reset_vm_hwm", lambda: False)
    unreset = step_memory.StepMemory({})
    with unreset.step("x"):
        pass
    assert "could not reset" in unreset.to_dict()["method"]


def test_a_reset_the_kernel_takes_but_ignores_is_not_believed(tmp_path):
    """CI's sandbox took the write to clear_refs and kept the old peak: both steps read the
    process's lifetime peak, and the method claimed a per-step reset."""
    clear_refs, status = tmp_path / "clear_refs", tmp_path / "status"
    clear_refs.write_text("")
    status.write_text("VmHWM:\t 1069000 kB\nVmRSS:\t  500000 kB\n")
    assert step_memory.reset_vm_hwm(str(clear_refs), str(status)) is False
    status.write_text("VmHWM:\t  500100 kB\nVmRSS:\t  500000 kB\n")
    assert step_memory.reset_vm_hwm(str(clear_refs), str(status)) is True
    assert step_memory.reset_vm_hwm(str(tmp_path / "no" / "clear_refs"), str(status)) is False


def test_memory_bench_measures_the_poprt_step_where_the_backend_is_there(with_double, tmp_path):  # noqa: F811
    from benchmarks.memory import format_row, ipu_step, ipu_unavailable
    from kit.models import export_model

    small = export_model(
        "resnet50-torch-fp32", small=True, opset=IpuBackend.export_opset, cache=tmp_path / "models"
    )

    assert ipu_unavailable() is None
    row = {"model": small.name, "step": "ipu", "wall_s": 1.0, **ipu_step(small)}
    assert row["peak_bytes"] > 10e6 and row["model_bytes"] == small.onnx_path.stat().st_size
    line = format_row(row)
    assert (
        "ipu-convert" in line
        and "ipu-compile" in line
        and "[not run on an IPU]" in line
        and " ok " in line
    )
    with_double.setenv("KIT_IPU_PYTHON", "/nonexistent/python3.8")
    ipu_mod._AVAILABILITY.clear()
    assert "PopRT not installed" in ipu_unavailable()


def test_the_worker_sees_its_container_s_cgroup_v1_or_v2_limit(tmp_path):
    """Issue 51: the PopRT worker read only cgroup v2, as the kit did."""
    (tmp_path / "meminfo").write_text("MemTotal: 25000000 kB\nMemAvailable: 24000000 kB\n")
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "memory.limit_in_bytes").write_text("3000000000\n")
    (tmp_path / "memory" / "memory.usage_in_bytes").write_text("1000000000\n")
    assert (
        step_memory.available_memory_bytes(str(tmp_path / "meminfo"), str(tmp_path))
        == 2_000_000_000
    )
    (tmp_path / "memory.max").write_text("1500000000\n")
    (tmp_path / "memory.current").write_text("1000000000\n")
    assert (
        step_memory.available_memory_bytes(str(tmp_path / "meminfo"), str(tmp_path)) == 500_000_000
    )


def test_the_worker_does_not_count_reclaimable_page_cache_as_used(tmp_path):
    """A cgroup's usage counts the page cache of the files the worker read (the ONNX, a PopEF);
    the kernel reclaims its inactive part before it kills, as kit.measure.memory counts it: the
    worker's check refused a step that fits (StepWontFit) where the cache filled the limit."""
    (tmp_path / "meminfo").write_text("MemTotal: 25000000 kB\nMemAvailable: 24000000 kB\n")
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "memory.limit_in_bytes").write_text("3000000000\n")
    (tmp_path / "memory" / "memory.usage_in_bytes").write_text("2500000000\n")
    (tmp_path / "memory" / "memory.stat").write_text(
        "cache 2000000000\ntotal_inactive_file 1500000000\n"
    )
    assert (
        step_memory.available_memory_bytes(str(tmp_path / "meminfo"), str(tmp_path))
        == 2_000_000_000
    )
    (tmp_path / "memory.max").write_text("3000000000\n")
    (tmp_path / "memory.current").write_text("2500000000\n")
    (tmp_path / "memory.stat").write_text("anon 500000000\ninactive_file 1000000000\n")
    assert (
        step_memory.available_memory_bytes(str(tmp_path / "meminfo"), str(tmp_path))
        == 1_500_000_000
    )
