"""GPU provenance: visible devices only, driver/CUDA/cuDNN/TensorRT versions, peaks with sources."""

from __future__ import annotations

import csv

import pytest
from gpu_fakes import Board, FakeHost, four_boards, install

from kit.backends import BackendConfig, get_backend
from kit.hardware import environment, gpu_peaks
from kit.paths import data_dir


@pytest.fixture
def host(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    return install(monkeypatch, FakeHost(four_boards()))


def test_capture_lists_only_the_visible_gpu_and_the_versions(host):
    facts = environment.capture()
    assert facts["gpus"] == ["NVIDIA A100-SXM4-80GB"]  # one of four boards
    gpu = facts["gpu"]
    assert [v["pci_bus_id"] for v in gpu["visible"]] == ["00000000:21:00.0"]
    assert (
        gpu["driver"] == "580.65.06"
        and gpu["cuda_driver"] == "13.0"
        and gpu["cuda_visible_devices"] == "1"
    )
    for key in (
        "cuda_runtime_torch",
        "cudnn_torch",
        "tensorrt",
        "onnxruntime_build",
        "onnxruntime_distribution",
    ):
        assert key in gpu  # None where absent (this CPU torch has no CUDA runtime)
    assert host.init == 0


def test_gpu_device_info_names_the_run_gpu_and_its_peak(host):
    info = get_backend("onnxruntime").device_info(BackendConfig(precision="fp16", device="cuda"))
    assert info["kind"] == "gpu" and info["name"] == "NVIDIA A100-SXM4-80GB"
    assert (
        info["peak"]["gflops"] == 312_000
        and "A100 Tensor Core GPU datasheet" in info["peak"]["method"]
    )
    assert info["cuda_device"]["pci_bus_id"] == "00000000:21:00.0"
    fp32 = get_backend("torch").device_info(BackendConfig(device="cuda"))["peak"]
    assert fp32["gflops"] == 19_500 and "TF32" in fp32["method"]


@pytest.mark.parametrize(
    ("name", "gpu"),
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA H100 NVL", "H100 NVL"),
        ("NVIDIA H200", "H200 SXM"),
        ("NVIDIA A100-PCIE-40GB", "A100 (SXM4 and PCIe, 40/80 GB)"),
        ("NVIDIA A10", "A10"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA L40S", "L40S"),
        ("Tesla T4", "T4"),
        ("Tesla V100-SXM2-16GB", "V100 SXM2"),
        ("NVIDIA GeForce RTX 4090", "GeForce RTX 4090"),
        ("NVIDIA L40", None),
        ("NVIDIA A40", None),
    ],
)
def test_peak_table_matches_names(name, gpu):
    assert gpu_peaks.match_gpu(name) == gpu


def test_peak_table_is_complete_and_sourced():
    with open(data_dir() / "gpu" / "peaks.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert rows and all(
        r["source"].startswith("NVIDIA") and float(r["tflops_dense"]) > 0 for r in rows
    )
    for gpu in {r["gpu"] for r in rows}:
        precisions = {r["precision"] for r in rows if r["gpu"] == gpu}
        assert {"fp32", "fp16"} <= precisions, gpu
    assert gpu_peaks.peak_for("NVIDIA H100 80GB HBM3", "fp8")["gflops"] == 1_979_000
    assert gpu_peaks.peak_for("Tesla T4", "bf16") is None  # Turing has no bf16 tensor cores


def test_unknown_gpu_says_why_there_is_no_peak(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    install(monkeypatch, FakeHost([Board(0, "00000000:01:00.0", "NVIDIA A40", 1)]), nvml=False)
    info = get_backend("onnxruntime").device_info(BackendConfig(device="cuda"))
    assert info["peak"] is None and "no peak tabled for NVIDIA A40" in info["note"]


def test_every_report_says_which_gpu_paths_ran_on_a_real_gpu(monkeypatch, outputs):
    """Issue 43 item 8: as the IPU reports say 'not run on an IPU', every report (each result's
    provenance and the index) says which GPU paths of this kit version ran on a real GPU: none
    yet."""
    from kit.hardware import gpu_verified
    from kit.publish.report.provenance import provenance
    from kit.publish.site import write_index
    from kit.results import RunResult

    statement = gpu_verified.gpu_paths_statement()
    paths = gpu_verified.gpu_paths()
    assert statement.startswith(
        f"GPU paths of this kit version run on a real GPU: none of {len(paths)};"
    )
    assert {p.backend for p in paths} == {"torch", "onnxruntime", "tensorrt"}
    assert all(p.label in statement for p in paths) and "test doubles" in statement
    page = provenance(RunResult.new("model_benchmark", "m", {}, {}))
    assert "GPU paths</th>" in page and "none of 7" in page
    record = {
        "name": "published_results",
        "notebook": "published_results.ipynb",
        "status": "ok",
        "run_id": "r1",
        "duration_s": 1.0,
        "fingerprint": "f",
        "html": "r.html",
        "results": "r.json",
        "message": "",
    }
    index = write_index([record], outputs).read_text()
    assert "GPU paths of this kit version run on a real GPU: none of 7" in index
    ran = gpu_verified.GpuPath(
        "tensorrt", "TensorRT's own Python API", "NVIDIA H200, kit abc123, 2026-12-01", ""
    )
    monkeypatch.setattr(gpu_verified, "gpu_paths", lambda: (ran, *paths[:-1]))
    assert gpu_verified.gpu_paths_statement().startswith(
        "GPU paths of this kit version run on a real GPU: tensorrt: TensorRT's own Python API "
        "(NVIDIA H200, kit abc123"
    )
