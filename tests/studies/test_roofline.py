"""Roofline positions, bytes moved per sample from the graph, the bandwidth benchmark, and the
peaks per precision."""

from __future__ import annotations

import dataclasses

import pytest

from kit.hardware import environment
from kit.models.flops import count_traffic_per_sample
from kit.models.spec import ExportedModel, WeightsInfo
from kit.results import Measurement
from kit.studies import roofline


def test_position_names_the_bound_and_flags_a_figure_far_below_it():
    # intensity 10 FLOP/B x 20 GB/s = 200 GFLOP/s memory roof, above a 100 GFLOP/s peak: compute
    # bound
    compute = roofline.position(1e9, 1e8, peak_gflops=100.0, bandwidth_gbs=20.0, samples_per_s=50.0)
    assert compute["bound"] == "compute" and compute["attainable_gflops"] == 100.0
    assert compute["fraction_of_bound"] == pytest.approx(0.5) and not compute["far_below"]
    # intensity 1 FLOP/B: the memory roof (20 GFLOP/s) binds
    memory = roofline.position(1e9, 1e9, peak_gflops=100.0, bandwidth_gbs=20.0, samples_per_s=2.0)
    assert memory["bound"] == "memory" and memory["attainable_gflops"] == pytest.approx(20.0)
    assert memory["far_below"] is True  # 2 GFLOP/s of 20
    # of the attainable 20, not of the 100 peak
    assert memory["fraction_of_bound"] == pytest.approx(0.1)
    assert memory["ridge_flop_per_byte"] == pytest.approx(5.0)


def test_bytes_per_sample_share_weights_across_the_batch_and_follow_the_precision():
    traffic = {"weight_elements": 1000, "activation_elements": 10}
    assert roofline.bytes_per_sample(traffic, "fp32", 1) == 4000 + 40
    assert roofline.bytes_per_sample(traffic, "fp32", 10) == 400 + 40
    assert roofline.bytes_per_sample(traffic, "bf16", 1) == 2000 + 20
    # dynamic int8: fp32 activations
    assert roofline.bytes_per_sample(traffic, "int8", 1) == 1000 + 40


def test_traffic_from_the_graph_counts_the_weights(small):
    traffic = count_traffic_per_sample(small.onnx_path, small.inputs)
    assert traffic["weight_elements"] == pytest.approx(small.params, rel=0.05)
    assert traffic["activation_elements"] > 0 and traffic["unresolved"] == 0


def test_stream_benchmark_measures_a_bandwidth_and_is_cached(outputs, monkeypatch):
    monkeypatch.setenv("KIT_CACHE", str(outputs / "cache"))
    monkeypatch.setattr(roofline, "STREAM_ELEMENTS", 1 << 18)
    monkeypatch.setattr(roofline, "STREAM_REPEATS", 2)
    first = roofline.memory_bandwidth()
    assert first["gbs"] > 0 and "STREAM-like" in first["method"]
    monkeypatch.setattr(
        roofline, "stream_benchmark", lambda: pytest.fail("should come from the cache")
    )
    assert roofline.memory_bandwidth() == first


def test_peaks_are_stated_per_precision_with_int8_separately():
    peaks = {p["precision"]: p for p in environment.cpu_peaks()}
    assert set(peaks) == {"fp32", "bf16", "fp16", "int8"}
    assert peaks["int8"]["unit"] == "GOPS" and peaks["fp32"]["unit"] == "GFLOP/s"
    assert all(p["method"] and p["source"] and p["gflops"] > 0 for p in peaks.values())


def test_a_16bit_type_without_native_arithmetic_gets_the_fp32_rate():
    flags = frozenset({"avx512f", "avx512_bf16", "avx512_vnni"})
    assert environment.precision_rate("bf16", flags)[:2] == (2.0, True)
    assert environment.precision_rate("fp16", flags)[:2] == (1.0, False)  # no avx512_fp16: emulated
    assert environment.precision_rate("int8", flags)[:2] == (4.0, True)
    assert environment.precision_rate("int8", frozenset({"avx2"}))[:2] == (1.0, False)


def test_a_cpu_with_amx_tiles_has_their_peak(monkeypatch):
    """A Sapphire Rapids guest (amx_bf16, amx_int8): OpenVINO's int8 BERT ran 1,751 GOPS, read as
    132 % of a VNNI-only int8 peak; bf16 read 185 % of the AVX-512 bf16 peak."""
    flags = frozenset(
        {"avx512f", "avx512_bf16", "avx512_vnni", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8"}
    )
    monkeypatch.setattr(environment, "cpu_flags", lambda: flags)
    monkeypatch.setattr(environment, "cpu_vendor_family", lambda: ("GenuineIntel", 6))
    monkeypatch.setattr(environment, "_max_ghz", lambda: 2.5)
    monkeypatch.setattr(environment, "usable_cores", lambda: 2)
    peaks = {p["precision"]: p for p in environment.cpu_peaks()}
    assert peaks["int8"]["gflops"] == 2048 * 2.5 * 2 and "amx_int8" in peaks["int8"]["method"]
    assert peaks["bf16"]["gflops"] == 1024 * 2.5 * 2 and peaks["bf16"]["native"]
    assert peaks["fp16"]["gflops"] == 128 * 2.5 * 2  # no amx_fp16: AVX-512 FP16's 2 x 64
    assert peaks["fp32"]["gflops"] == 64 * 2.5 * 2  # AMX does no fp32
    assert environment.amx_rate("int8", flags - {"amx_int8"}) is None


def test_shared_work_is_spread_over_the_batch_and_a_figure_above_its_bound_is_flagged(
    tmp_path, outputs, monkeypatch
):
    """VideoBERT encodes its 100 prompts once per call: counting them per sample put batch 4 at 153
    % of the bf16 peak. Spread over the call's samples, the figure falls under the bound."""
    from tests.models.test_flops import prompts_model

    monkeypatch.setattr(roofline, "memory_bandwidth", lambda: {"gbs": 10.0, "method": "test"})
    path, specs = prompts_model(tmp_path)
    per_sample, shared = 2 * 8 * 16 + 2 * 16 * 100, 2 * 100 * 8 * 16
    peak = {"gflops": 1e-3, "unit": "GFLOP/s"}  # 1 MFLOP/s
    calls_per_s = 1e6 / (shared + 4 * per_sample) * 0.5  # half the peak at batch 4
    m = Measurement.from_dict({"batch_size": 4, "throughput": 4 * calls_per_s})
    model = ExportedModel(
        name="prompts",
        onnx_path=path,
        inputs=specs,
        outputs=("y",),
        weights=WeightsInfo("random", "test"),
        flops_per_sample=per_sample,
        flops_shared_per_call=shared,
    )
    assert model.flops_per_call(4) == shared + 4 * per_sample
    (row,) = roofline.figure_rows(model, "fp32", peak, [m])
    assert row["fraction_of_bound"] == pytest.approx(0.5) and not row["above_bound"]
    counted_per_sample = dataclasses.replace(
        model, flops_per_sample=per_sample + shared, flops_shared_per_call=0.0
    )
    (wrong,) = roofline.figure_rows(counted_per_sample, "fp32", peak, [m])
    assert wrong["above_bound"] and wrong["fraction_of_bound"] > 1.15
    traffic = roofline.graph_traffic(path, specs)
    # t and its embedding, once a call
    assert traffic["shared_activation_elements"] >= 100 * 8 + 100 * 16


@pytest.mark.parametrize(("math", "tflops"), [("fp16", 989.5), ("tf32", 494.5), ("fp32", 67.0)])
def test_a_gpu_figure_is_placed_against_the_peak_of_the_arithmetic_that_ran(
    small, outputs, math, tflops
):
    """Issue 43: an H200 report read '% of peak 65.8' against the fp32 CUDA-core peak while cuDNN
    ran TF32/fp16 tensor cores, and 'Roofline: not placed' beside it. The session's `math` picks the
    peak; '% of peak' and the roofline use that one peak, with the card's nominal bandwidth."""
    from kit.publish.report.tables import compute_columns
    from kit.results import RunResult
    from kit.studies.model_benchmark import Config, add_roofline

    precision = "fp16" if math == "fp16" else "fp32"
    cfg = Config(model=small.name, backend="torch", precision=precision, device="cuda", small=True)
    # what device_info gave before the run
    fp32_peak = {"gflops": 67_000.0, "method": "H200 SXM dense fp32 peak"}
    result = RunResult(
        "model_benchmark",
        "x",
        parameters={},
        environment={},
        model=small.describe(),
        backend={
            "name": "torch",
            "device_info": {"kind": "gpu", "name": "NVIDIA H200", "peak": fp32_peak},
            "session": {"math": math},
        },
        measurements=[
            {"batch_size": 4, "throughput": 0.3 * tflops * 1e12 / small.flops_per_sample}
        ],
    )
    add_roofline(result, small, cfg)
    (row,) = result.tables.to_dict()["roofline"]
    assert row["peak_gflops"] == tflops * 1000 and row["bandwidth_gbs"] == 4800.0
    assert "nominal" in row["bandwidth_method"] and row["peak_precision"] == math
    assert not [n for n in result.notes if "not placed" in n]
    # the roofline's peak
    assert compute_columns(result, result.measurements[0])["% of peak"] == 30.0


def test_a_gpu_without_a_tabled_peak_says_so_and_shows_no_share(small, outputs):
    from kit.publish.report.tables import compute_columns
    from kit.results import RunResult
    from kit.studies.model_benchmark import Config, add_roofline

    cfg = Config(model=small.name, backend="torch", precision="bf16", device="cuda", small=True)
    result = RunResult(
        "model_benchmark",
        "x",
        parameters={},
        environment={},
        model=small.describe(),
        backend={
            "name": "torch",
            "device_info": {"name": "Tesla T4", "peak": {"gflops": 8100.0}},
            "session": {"math": "bf16"},
        },
        measurements=[{"batch_size": 4, "throughput": 100.0}],
    )
    add_roofline(result, small, cfg)
    assert (
        not result.tables.has("roofline") and "no bf16 peak tabled for Tesla T4" in result.notes[-1]
    )
    assert (
        compute_columns(result, result.measurements[0])["% of peak"]
        == "— (no peak for this device)"
    )
