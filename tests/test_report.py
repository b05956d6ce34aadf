import pytest

from kit.report import (
    accuracy_table,
    beside_published,
    bytemlperf_table,
    interpretation,
    numerics_table,
    power_table,
    provenance,
)
from kit.studies.model_benchmark import run as run_model_benchmark

FAST = dict(model="resnet50-torch-fp32", small=True, batch_sizes=[1, 2], warmup=1,
            min_duration_s=0.05, min_count=3, target_ci=0.0)


@pytest.fixture(scope="module")
def result():
    return run_model_benchmark(FAST)


def test_tables_have_the_bytemlperf_columns(result):
    t = bytemlperf_table(result)
    assert list(t["BS"]) == [1, 2]
    assert {"QPS", "AVG Latency (ms)", "P99 Latency (ms)", "p50 (ms)", "p90 (ms)", "power method"} <= set(t.columns)
    assert t["power method"].str.startswith("unavailable: ").all()
    flops = result.model["flops_per_sample"]
    assert t["GFLOP/s"].iloc[1] == pytest.approx(flops * result.measurements[1]["throughput"] / 1e9, rel=0.01, abs=0.051)  # shown to 0.1
    assert t["% of peak"].iloc[1] > 0
    assert list(numerics_table(result)["batch_size"]) == [1, 2]
    assert accuracy_table(result).iloc[0]["status"].startswith("not ")
    assert list(power_table(result)["batch_size"]) == [1, 2]


def test_beside_published_is_formatted_and_labelled(result):
    t = beside_published(result)
    headline = t.iloc[0]
    assert headline["figure"] == "QPS" and headline["verdict"] == "not comparable"
    assert headline["published"] == "13,499"  # as printed, not 1.3499e+04
    assert "e+" not in headline["measured"]


def test_provenance_names_hardware_weights_and_method(result):
    page = provenance(result)
    for words in ("no IPU on this machine", "random initialisation", "onnxruntime", "perf_counter_ns",
                  "Tolerances"):
        assert words in page


def test_interpretation_for_ok_error_and_user_onnx(result, tmp_path):
    assert "not comparable" in interpretation(result)
    failed = run_model_benchmark({**FAST, "model": "nope"})
    assert "did not complete" in interpretation(failed)
    from kit.models import export_model

    onnx = export_model("resnet50-torch-fp32", small=True).onnx_path
    own = run_model_benchmark({**FAST, "model": str(onnx), "accuracy": False})
    assert own.status == "ok", own.errors
    assert "reached" in interpretation(own) and "not comparable" in interpretation(own)


def test_readable_numbers():
    from kit.scorecard import readable

    assert readable(31446195.0, 6) == "31,446,195"
    assert readable(0.76963, 6) == "0.76963"
    assert readable(1474.16, 6) == "1,474.16"
    assert readable(21900.4, 4) == "21,900"
    assert readable(0.00161, 4) == "0.00161"
    assert readable(float("nan"), 4) == ""


def test_random_weights_sentence_says_what_a_diff_means(result):
    """Issue 14 #5: numeric diffs do depend on the weights; the report no longer says otherwise."""
    text = interpretation(result)
    assert "numeric diffs do not depend" not in text
    assert "numeric diffs do" in text and "not compared with the published Mean Diff" in text
