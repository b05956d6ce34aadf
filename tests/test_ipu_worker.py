"""The PopRT worker: Python 3.8 grammar, allowed imports, and its JSON contract (run against the
poprt test double as a subprocess, exactly as the kit runs it)."""

from __future__ import annotations

import ast
import base64
import io
import json
import subprocess
import sys

import numpy as np
import pytest

from kit.backends import ipu_worker
from tests.ipu_helpers import TINY_INPUTS, double_env, tiny_model, tiny_reference

SOURCE = ipu_worker.__file__


@pytest.fixture(scope="module")
def resnet_small():
    from kit.models import export_model

    return export_model("resnet50-torch-fp32", small=True)


def run_worker(job: dict, tmp_path, with_double: bool = True) -> dict:
    job_path, result_path = tmp_path / "job.json", tmp_path / "result.json"
    job_path.write_text(json.dumps(job))
    proc = subprocess.run([sys.executable, SOURCE, str(job_path), str(result_path)],
                          env=double_env(with_double), capture_output=True, text=True, timeout=120)
    assert result_path.exists(), proc.stderr
    return json.loads(result_path.read_text())


def tiny_job(tmp_path, **kw) -> dict:
    job = {"onnx_path": str(tiny_model(tmp_path / "tiny.onnx")), "precision": "fp32",
           "batch_sizes": [2, 5], "inputs": TINY_INPUTS, "clients": 2, "warmup": 1,
           "min_duration_s": 0.05, "min_count": 7, "cache_dir": str(tmp_path / "popef"),
           "return_outputs": True, "seed": 3}
    job.update(kw)
    return job


def outputs_of(batch: dict) -> list[np.ndarray]:
    return [np.load(io.BytesIO(base64.b64decode(o["npy_b64"]))) for o in batch["outputs"]]


def test_worker_parses_as_python_38_and_imports_only_allowed_modules():
    tree = ast.parse(open(SOURCE).read(), feature_version=(3, 8))
    allowed = set(sys.stdlib_module_names) | {"numpy", "onnx", "poprt", "__future__"}
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert imported <= allowed, imported - allowed
    assert "kit" not in imported


def test_contract_outputs_and_call_times_per_batch_size(tmp_path):
    result = run_worker(tiny_job(tmp_path), tmp_path)
    assert result["test_double"] is True
    assert result["note"] == "not run on an IPU: PopRT test double over ONNX Runtime"
    assert result["device"] == {"ipu_version": "ipu21", "num_devices": 1}
    assert [b["batch_size"] for b in result["batches"]] == [2, 5]
    for batch in result["batches"]:
        assert batch["error"] is None
        assert batch["input_dtypes"] == {"x": "float32", "ids": "int32"}  # PopRT feeds int32
        assert len(batch["calls"]) == 2 and all(len(t) >= 7 for t in batch["calls"])
        assert all(s < e for thread in batch["calls"] for s, e in thread)
        expected = tiny_reference(ipu_worker.generate_inputs(TINY_INPUTS, batch["batch_size"], 3))
        for got, want in zip(outputs_of(batch), expected, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-6)


def test_popef_is_cached_by_model_and_options(tmp_path):
    job = tiny_job(tmp_path, batch_sizes=[2], measure=False)
    first = run_worker(job, tmp_path)["batches"][0]
    second = run_worker(job, tmp_path)["batches"][0]
    assert not first["popef_cached"] and second["popef_cached"]
    assert first["popef"] == second["popef"]
    other = run_worker(dict(job, compiler_options={"batches_per_step": 4}), tmp_path)["batches"][0]
    assert other["popef"] != first["popef"] and not other["popef_cached"]
    assert other["compiler_options"] == {"batches_per_step": 4, "ipu_version": "ipu21"}


def test_fp16_converts_inputs_and_stays_close(tmp_path):
    batch = run_worker(tiny_job(tmp_path, precision="fp16", batch_sizes=[3], measure=False),
                       tmp_path)["batches"][0]
    assert batch["error"] is None and batch["input_dtypes"]["x"] == "float16"
    got = outputs_of(batch)
    assert got[0].dtype == np.float16
    expected = tiny_reference(ipu_worker.generate_inputs(TINY_INPUTS, 3, 3))
    np.testing.assert_allclose(got[0].astype(np.float32), expected[0], atol=2e-2)


def test_fp8_passes_published_params(tmp_path):
    batch = run_worker(tiny_job(tmp_path, precision="fp8", batch_sizes=[2], measure=False),
                       tmp_path)["batches"][0]
    assert batch["error"] is None
    assert batch["converter_options"]["fp8_params"] == "F143,F143,-3,-3"
    assert batch["fp8_op_types"] == ["Conv", "MatMul", "Gemm"]


def test_failing_batch_size_keeps_the_others(tmp_path):
    bad = tmp_path / "bad.npz"
    np.savez(bad, x=np.zeros((4, 4), np.float32), ids=np.zeros((3, 3), np.int64))  # x wrong for bs 3
    result = run_worker(tiny_job(tmp_path, batch_sizes=[2, 3, 4], inputs_npz={"3": str(bad)}), tmp_path)
    errors = {b["batch_size"]: b["error"] for b in result["batches"]}
    assert errors[2] is None and errors[4] is None
    assert "ValueError" in errors[3] and "'x'" in errors[3] and "[3, 4]" in errors[3]


def test_unknown_compiler_option_is_a_batch_error(tmp_path):
    batch = run_worker(tiny_job(tmp_path, batch_sizes=[2], compiler_options={"replicas": 2}),
                       tmp_path)["batches"][0]
    assert "unknown compiler option" in batch["error"] and "replicas" in batch["error"]


def test_missing_poprt_is_fatal_not_a_traceback(tmp_path):
    result = run_worker({"mode": "probe"}, tmp_path, with_double=False)
    assert result["fatal"].startswith("ModuleNotFoundError")


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_resnet50_small_export_through_the_worker(tmp_path, precision, resnet_small):
    spec = [s.to_dict() for s in resnet_small.inputs]
    job = {"onnx_path": str(resnet_small.onnx_path), "precision": precision, "batch_sizes": [2],
           "inputs": spec, "clients": 1, "warmup": 1, "min_duration_s": 0.0, "min_count": 3,
           "cache_dir": str(tmp_path / "popef"), "return_outputs": True}
    batch = run_worker(job, tmp_path)["batches"][0]
    assert batch["error"] is None, batch.get("traceback")
    assert outputs_of(batch)[0].shape == (2, 10)
    assert len(batch["calls"][0]) >= 3
