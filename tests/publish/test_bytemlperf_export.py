"""The kit's results in ByteMLPerf's report format: read with the same reader as the 30 published
reports, same keys and types, figures by ByteMLPerf's definitions, unmeasured fields left out."""

import json
import shutil

import pytest

from kit.cli.main import main
from kit.measure.bytemlperf import bytemlperf_figures
from kit.notebook import run_study
from kit.publish.bytemlperf_export import KIT_FIELDS, backend_name
from kit.publish.bytemlperf_export import report as bytemlperf_report
from kit.published.bytemlperf_reports import ReportError, key_types, read_report, report_files
from kit.results import RunResult
from tests.conftest import ROOT, shared_or_skip

SMALL = {
    "model": "resnet50-torch-fp32",
    "small": True,
    "batch_sizes": [1, 2],
    "warmup": 1,
    "min_duration_s": 0.05,
    "min_count": 3,
    "target_ci": 0.0,
    "accuracy": False,
}


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A small model benchmark run as a batch job runs it; its result and its ByteMLPerf report."""
    out = tmp_path_factory.mktemp("outputs")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KIT_OUTPUTS", str(out))
        mp.setenv("KIT_CACHE", str(ROOT / "outputs" / "cache"))
        path = out / "runs" / "r1" / "resnet50.json"
        path.parent.mkdir(parents=True)
        result = run_study("model_benchmark", {**SMALL, "results_path": str(path)})
    assert result.status == "ok", result.errors
    reports = sorted((path.parent / "bytemlperf").rglob("result-*.json"))
    assert len(reports) == 1, reports
    return RunResult.read(path), reports[0]


def published_reports():
    return report_files(shared_or_skip("reference", "bytemlperf_reports"))


def test_the_kit_report_has_the_published_keys_and_types(exported):
    _, path = exported
    ours = key_types(read_report(path))  # the reader the import uses: it checks every field
    published = {}
    for file in published_reports():
        for key, kind in key_types(read_report(file)).items():
            published.setdefault(key, set()).add(kind)
    assert len(published_reports()) == 30
    # ByteMLPerf's writer (perf_engine.py, a30b4f9) adds the run's date; the 30 reports predate it
    published["Execution Date"] = {"string"}
    published.update({field: {"string"} for field in KIT_FIELDS})  # what the figures stand on
    unknown = {k: v for k, v in ours.items() if k not in published}
    assert not unknown, f"keys no published report has: {unknown}"
    wrong = {k: (v, published[k]) for k, v in ours.items() if v not in published[k]}
    assert not wrong, f"types unlike the published reports': {wrong}"
    ipu = key_types(
        read_report(
            shared_or_skip(
                "reference", "bytemlperf_reports", "IPU", "resnet50-torch-fp32", "result-fp16.json"
            )
        )
    )
    core = {
        "Model",
        "Backend",
        "Host Info",
        "Graph Compile",
        "Graph Compile/Compile Precision",
        "Performance",
        "Performance[]/BS",
        "Performance[]/QPS",
        "Performance[]/AVG Latency",
        "Performance[]/P99 Latency",
        "Accuracy",
        "Accuracy/Mean Diff",
        "Accuracy/Diff Dist",
    }
    assert {k: ours.get(k) for k in core} == {k: ipu[k] for k in core}


def test_figures_by_bytemlperfs_definitions_and_where_they_go(exported):
    result, path = exported
    report = json.loads(path.read_text())
    backend = report["Backend"]
    assert path.parent.parent.name == backend and path.parent.name == "resnet50-torch-fp32"
    assert path.name == "result-fp32.json" and report["Model"] == "RESNET50-TORCH-FP32"
    assert backend.startswith("CPU-") and backend.endswith("-onnxruntime")
    assert [p["BS"] for p in report["Performance"]] == [1, 2]
    for entry, m in zip(report["Performance"], result.measurements, strict=True):
        own = bytemlperf_figures(m.call_times(), m.batch_size)  # recomputed from the raw call times
        assert entry["QPS"] == int(own["qps"])
        assert entry["AVG Latency"] == round(own["avg_latency_ms"], 2)
        assert entry["P99 Latency"] == round(own["p99_latency_ms"], 2)
    assert report["Accuracy"]["Mean Diff"] == round(result.numerics[0].mean_abs, 5)
    png = path.parent / report["Accuracy"]["Diff Dist"]
    assert (
        png.name == "resnet50-torch-fp32-to-fp32.png"
        and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    )
    assert report["Host Info"] == result.environment.cpu.model


def test_random_weights_and_synthetic_inputs_are_named_and_no_dataset_is_claimed(exported):
    """accuracy=False: no dataset read, so no `Dataset`; the diffs' inputs and the random weights
    are named, as the HTML report names them."""
    _, path = exported
    report = json.loads(path.read_text())
    assert "Dataset" not in report
    assert report["Weights"] == "random initialisation (seed 0): accuracy not meaningful"
    assert report["Accuracy"]["Diff Inputs"].startswith("synthetic (the kit's inputs, seed 0)")
    # an ORT fp32 CPU run is the reference itself: its zero diffs say so
    assert report["Accuracy"]["Mean Diff"] == 0.0 and report["Accuracy"]["Diff Reference"] == (
        "onnxruntime fp32 CPU (this run is the reference: its diffs are zero by construction)"
    )
    read = RunResult.read(path.parents[3] / "resnet50.json")  # the module's result left as it is
    read.accuracy = [
        {"metric": "Top-1", "value": 0.001, "status": "measured", "data_percent": 100.0}
    ]
    measured, _, _ = bytemlperf_report(read)  # a dataset read: its metric, and its name
    assert measured["Dataset"] == "OPEN_IMAGENET" and measured["Accuracy"]["Top-1"] == 0.001
    assert measured["Weights"].startswith("random initialisation")


def test_what_the_kit_did_not_measure_is_left_out(exported):
    _, path = exported
    report = json.loads(path.read_text())
    assert "Subgraph Coverage" not in report["Graph Compile"]  # not measured on a CPU
    assert "Compile Duration" not in report["Graph Compile"]  # measured by the IPU backend only
    assert not {"Device Count", "Version"} & set(report)
    assert not {"Top-1", "Data Percent"} & set(report["Accuracy"])  # accuracy=False: no metric


def test_kit_export_bytemlperf_writes_the_same_report_from_the_result_json(exported, capsys):
    result, path = exported
    before = path.read_bytes()
    result_json = path.parents[3] / "resnet50.json"
    shutil.rmtree(path.parents[2])
    assert main(["export-bytemlperf", str(result_json)]) == 0
    assert str(path) in capsys.readouterr().out
    assert path.read_bytes() == before  # from the JSON alone, the same report
    assert (path.parent / "resnet50-torch-fp32-to-fp32.png").is_file()


def test_the_backend_names_hardware_part_and_runtime():
    def named(hardware, backend, device, device_name):
        result = RunResult.new(
            "model_benchmark", "m", {"hardware": hardware}, {"cpu": {"model": "AMD EPYC 7763"}}
        )
        result.backend = {"name": backend, "device": device, "device_info": {"name": device_name}}
        return backend_name(result)

    assert (
        named("cpu", "onnxruntime", "cpu", "AMD EPYC 7763 64-Core Processor")
        == "CPU-AMD-EPYC-onnxruntime"
    )
    assert (
        named("cuda", "onnxruntime", "tensorrt", "NVIDIA H100 80GB HBM3")
        == "GPU-NVIDIA-H100-onnxruntime-tensorrt"
    )
    assert named("cuda", "torch", "cuda", "NVIDIA A10G") == "GPU-NVIDIA-A10G-torch"
    assert named("ipu", "ipu", "ipu", "C600") == "IPU-C600-poprt"
    assert named("ipu", "ipu", "ipu", "C600 [not run on an IPU]") == "IPU-C600-emulated-poprt"


def test_gpu_coverage_ipu_compile_time_and_unmeasured_figures():
    result = RunResult.new(
        "model_benchmark", "m", {"model": "resnet50-torch-fp32", "hardware": "cuda"}, {}
    )
    result.backend = {
        "name": "onnxruntime",
        "device": "cuda",
        "precision": "fp16",
        "device_info": {"name": "NVIDIA H100"},
        "session": {"placement": {"kernels": 200, "cpu_share": 0.03}, "compile_seconds": 12.345678},
    }
    untrimmed = "every call (a thread made 40 calls or fewer: no trim)"
    result.measurements = [
        {
            "batch_size": 8,
            "bytemlperf": {
                "qps": 1234.9,
                "avg_latency_ms": 6.478,
                "p99_latency_ms": float("nan"),
                "kept": "each thread without its first and last 20 calls",
            },
        },
        {"batch_size": 16, "bytemlperf": {"qps": 2000.0, "kept": untrimmed}},
    ]
    report, backend, precision = bytemlperf_report(result)
    assert report["Graph Compile"] == {
        "Compile Duration": 12.34568,
        "Compile Precision": "FP16",
        "Subgraph Coverage": 97.0,
    }
    # no P99: not measured; a window too short for ByteMLPerf's trim says which calls it counts
    assert report["Performance"] == [
        {"BS": 8, "QPS": 1234, "AVG Latency": 6.48},
        {"BS": 16, "QPS": 2000, "Calls Kept": untrimmed},
    ]
    assert "Accuracy" not in report and (backend, precision) == (
        "GPU-NVIDIA-H100-onnxruntime-cuda",
        "fp16",
    )


def test_a_report_not_in_the_format_is_named_with_its_field(tmp_path):
    bad = tmp_path / "X" / "m" / "result-fp16.json"
    bad.parent.mkdir(parents=True)
    bad.write_text(json.dumps({"Model": "M", "Backend": "X"}))
    with pytest.raises(ReportError, match=r"result-fp16.json: field 'Performance' is missing"):
        read_report(bad)
    bad.write_text(
        json.dumps({"Model": "M", "Backend": "X", "Performance": [{"BS": 1, "QPS": "fast"}]})
    )
    with pytest.raises(ReportError, match=r"Performance\[0\].QPS is 'fast', not number"):
        read_report(bad)
    bad.write_text("{")
    with pytest.raises(ReportError, match="is not JSON"):
        read_report(bad)
    with pytest.raises(ReportError, match="holds no result"):
        (tmp_path / "empty").mkdir()
        report_files(tmp_path / "empty")


@pytest.mark.parametrize(
    "field, value, said",
    [
        ("model", "../../../escaped", "invalid model="),
        ("hardware", "../../..", "invalid ByteMLPerf backend="),
        (
            "precision",
            "../../../x",
            "unknown run precision '../../../x'; known: bf16, fp16, fp32, fp8, int8",
        ),
    ],
)
def test_names_read_from_a_result_never_lead_its_report_outside_its_folder(
    tmp_path, capsys, field, value, said
):
    """Issue 51: the report's folders and file are named by the result's model, backend and
    precision."""
    params = {"model": "resnet50-torch-fp32", "hardware": "cpu", field: value}
    result = RunResult.new("model_benchmark", "m", params, {})
    result.backend = {
        "name": "onnxruntime",
        "device": "cpu",
        "precision": params.get("precision", "fp32"),
        "device_info": {"name": "AMD EPYC"},
    }
    result.measurements = [{"batch_size": 1, "bytemlperf": {"qps": 10.0, "avg_latency_ms": 1.0}}]
    path = result.write(tmp_path / "runs" / "r1" / "m.json")
    assert main(["export-bytemlperf", str(path)]) == 2
    assert said in capsys.readouterr().err
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == [path]
