"""The model benchmark and the scorecard over the IPU path, driven by the poprt test double."""

from pathlib import Path

from kit.backends.ipu import backend as ipu_mod
from kit.publish.scorecard import bytemlperf_rows
from kit.studies.model_benchmark import run as run_model_benchmark
from tests.ipu_helpers import double_env


def test_ipu_benchmark_runs_end_to_end_and_is_labelled_emulated(outputs, monkeypatch, tmp_path):
    for key, value in double_env(True).items():
        if key in ("PYTHONPATH", "KIT_IPU_PYTHON", "KIT_STEP_PEAKS"):
            monkeypatch.setenv(key, value)
    ipu_mod._AVAILABILITY.clear()
    result = run_model_benchmark(
        dict(
            model="resnet50-torch-fp32",
            small=True,
            backend="ipu",
            device="ipu",
            precision="fp16",
            batch_sizes=[32],
            clients=4,
            warmup=1,
            min_duration_s=0.05,
            min_count=5,
            accuracy=False,
            target_ci=0.0,
        )
    )
    ipu_mod._AVAILABILITY.clear()
    assert result.status == "ok", result.errors
    assert result.backend.session.more["emulated"] is True
    assert result.measurements[0].mode == "clients"
    assert 0 < result.numerics[0].max_abs < 0.1  # fp16 through the double vs ORT fp32
    rows = [
        r
        for r in bytemlperf_rows([(Path("r.json"), result)])
        if r.precision == "FP16" and r.model == "resnet50-torch-fp32"
    ]
    qps = next(r for r in rows if r.figure == "QPS" and r.study == "bytemlperf_c600")
    assert qps.verdict == "not comparable" and qps.batch_size == "32"  # the headline's batch
    assert "not run on an IPU" in qps.measured_hardware and "not run on an IPU" in qps.reason


def test_ipu_absent_is_a_one_line_error_in_the_result(outputs, monkeypatch):
    monkeypatch.setenv("KIT_IPU_PYTHON", "/nonexistent/python3.8")
    ipu_mod._AVAILABILITY.clear()
    result = run_model_benchmark(
        dict(
            model="resnet50-torch-fp32",
            small=True,
            backend="ipu",
            device="ipu",
            precision="fp16",
            batch_sizes=[2],
        )
    )
    ipu_mod._AVAILABILITY.clear()
    assert result.errors == [
        "BackendUnavailable: IPU backend unavailable: PopRT not installed "
        "(needs the Poplar SDK; see README)"
    ]
