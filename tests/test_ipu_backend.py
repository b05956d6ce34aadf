"""The ipu backend end to end through the poprt test double: load, run, numerics, measure."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from kit.backends import BACKENDS, BackendConfig, get_backend, require_backend
from kit.backends import ipu as ipu_mod
from kit.backends.ipu import EMULATED_NOTE, UNAVAILABLE, IpuBackend, IpuWorkerError
from kit.backends.ipu_settings import batch_sizes_for, settings_for
from kit.errors import BackendUnavailable, InvalidParameter, KitError, UnknownNameError
from kit.measure import MeasureConfig
from kit.models.spec import ExportedModel, InputSpec, WeightsInfo
from kit.numerics import NumericDiff
from tests.ipu_helpers import TINY_INPUTS, double_env, tiny_model, tiny_reference


@pytest.fixture
def with_double(monkeypatch):
    for key, value in double_env(True).items():
        if key in ("PYTHONPATH", "KIT_IPU_PYTHON"):
            monkeypatch.setenv(key, value)
    ipu_mod._AVAILABILITY.clear()
    yield
    ipu_mod._AVAILABILITY.clear()


@pytest.fixture(scope="module")
def resnet_small():
    from kit.models import export_model

    return export_model("resnet50-torch-fp32", small=True)


def tiny_exported(tmp_path, name="tiny") -> ExportedModel:
    return ExportedModel(name, tiny_model(tmp_path / "tiny.onnx"),
                         tuple(InputSpec.from_dict(s) for s in TINY_INPUTS), ("y", "z"),
                         WeightsInfo("random", "seed 0"))


def config(tmp_path, precision="fp16", **options) -> BackendConfig:
    return BackendConfig(precision=precision, device="ipu",
                         options={"cache_dir": str(tmp_path / "popef"), **options})


FAST = MeasureConfig(warmup=1, min_duration_s=0.05, min_count=5, clients=2)


def test_registered_under_ipu():
    assert BACKENDS.get("ipu") is IpuBackend
    assert get_backend("ipu").precisions == ("fp32", "fp16", "fp8")


def test_unavailable_gives_exactly_the_one_line_message(monkeypatch):
    for key, value in double_env(False).items():
        if key in ("PYTHONPATH", "KIT_IPU_PYTHON"):
            monkeypatch.setenv(key, value)
    ipu_mod._AVAILABILITY.clear()
    assert IpuBackend().availability() == UNAVAILABLE
    with pytest.raises(BackendUnavailable) as err:
        require_backend("ipu")
    assert str(err.value) == "IPU backend unavailable: PopRT not installed (needs the Poplar SDK; see README)"
    monkeypatch.setenv("KIT_IPU_PYTHON", "/nonexistent/python3.8")
    ipu_mod._AVAILABILITY.clear()
    assert IpuBackend().availability() == UNAVAILABLE
    ipu_mod._AVAILABILITY.clear()


def test_device_info_says_emulated(with_double):
    info = IpuBackend().device_info(BackendConfig(precision="fp16", device="ipu"))
    assert info["kind"] == "ipu" and info["ipu_version"] == "ipu21" and info["num_devices"] == 1
    assert info["emulated"] is True and info["note"] == EMULATED_NOTE and info["peak"] is None


def test_resnet50_load_run_numerics_measure(with_double, tmp_path, resnet_small):
    import onnxruntime as ort

    backend = require_backend("ipu")
    session = backend.load(resnet_small, config(tmp_path), 2)
    d = session.description
    assert d["emulated"] is True and d["note"] == EMULATED_NOTE
    assert d["precision"] == "fp16" and d["poprt_version"].endswith("kit.test.double")
    assert d["input_shape"] == {"input_1.1": [2, 3, 32, 32]}
    inputs = resnet_small.make_inputs(2, seed=1)
    got = session.run(inputs)
    ref = ort.InferenceSession(str(resnet_small.onnx_path), providers=["CPUExecutionProvider"]).run(None, inputs)
    diff = NumericDiff.between(ref, got)
    assert diff.elements == 20 and diff.nan_count == 0
    assert 0 < diff.max_abs < 0.05  # fp16 differs from fp32, but not by much
    m = session.measure(inputs, 2, FAST)
    assert m.mode == "clients" and m.threads == 2 and len(m.calls) == 2
    assert all(len(t) >= 5 for t in m.calls) and m.throughput > 0
    assert m.extra["emulated"] is True and m.extra["note"] == EMULATED_NOTE
    assert len(list((tmp_path / "popef").glob("*.popef"))) == 1  # run/measure reused load's PopEF


def test_fp32_outputs_match_reference_exactly(with_double, tmp_path):
    model = tiny_exported(tmp_path)
    session = IpuBackend().load(model, config(tmp_path, "fp32"), 3)
    inputs = model.make_inputs(3, seed=5)
    for got, want in zip(session.run(inputs), tiny_reference(inputs), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    single = session.measure(inputs, 3, dataclasses.replace(FAST, clients=1))
    assert single.mode == "single" and single.threads == 1


def test_failing_batch_size_reports_error_and_keeps_others(with_double, tmp_path):
    model = tiny_exported(tmp_path)
    bad = {"x": np.zeros((9, 4), np.float32), "ids": np.zeros((3, 3), np.int64)}
    out = IpuBackend().run_batches(model, config(tmp_path), [2, 3], FAST, {3: bad})
    assert out[2].error is None and out[2].measurement.latency.count >= 10
    assert out[3].measurement is None and "shape [9, 4]" in out[3].error
    assert [o.shape for o in out[2].outputs] == [(2, 3), (2, 3)]


def test_session_misuse_is_refused(with_double, tmp_path):
    model = tiny_exported(tmp_path)
    session = IpuBackend().load(model, config(tmp_path, "fp32"), 2)
    inputs = model.make_inputs(2)
    with pytest.raises(InvalidParameter, match="replicas"):
        session.measure(inputs, 2, MeasureConfig(replicas=2))
    with pytest.raises(InvalidParameter, match="compiled for 2"):
        session.measure(inputs, 4, FAST)
    with pytest.raises(KitError, match="use measure"):
        session.bind(inputs)
    with pytest.raises(InvalidParameter, match="precision"):
        IpuBackend().load(model, config(tmp_path, "int8"), 2)


def test_bad_compiler_option_fails_load_with_reason(with_double, tmp_path):
    with pytest.raises(IpuWorkerError, match="CompilerOptions.available_memory_proportion"):
        IpuBackend().load(tiny_exported(tmp_path), config(
            tmp_path, compiler_options={"available_memory_proportion": 1.5}), 2)


def test_pack_models_say_the_unpacked_model_ran(with_double, tmp_path):
    session = IpuBackend().load(tiny_exported(tmp_path, name="bert-torch-fp32"), config(tmp_path), 2)
    assert "unpacked model" in session.description["pack_mode"]


def test_published_settings():
    assert batch_sizes_for("resnet50-torch-fp32", "fp8") == (4, 32)
    assert batch_sizes_for("swin-large-torch-fp32", "fp8") == (4,)
    assert batch_sizes_for("widedeep-tf-fp32", "fp16") == (1024, 20000)
    bert = settings_for("bert-torch-fp32")
    assert bert.pack_batch_size == {"fp16": 40, "fp8": 45} and bert.clients_or_default() == 1
    assert settings_for("deberta-torch-fp32").pack_batch_size == {"fp16": 10}
    assert settings_for("clip-onnx-fp32").clients == 3 and settings_for("widedeep-tf-fp32").clients == 5
    assert settings_for("resnet50-torch-fp32").fp8_params == "F143,F143,-3,-3"
    with pytest.raises(UnknownNameError, match="resnet50-torch-fp32"):
        settings_for("yolov5-onnx-fp32")
    with pytest.raises(UnknownNameError):
        batch_sizes_for("clip-onnx-fp32", "fp8")
