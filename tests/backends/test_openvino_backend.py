"""kit.backends.openvino_backend: f32 and native 16-bit run close to ONNX Runtime fp32 on the small
ResNet-50 with static shapes; a 16-bit type the CPU lacks, fp8, a missing library and an unknown
hint are refused with the reason; NNCF int8 is calibrated on the row's seeded inputs and cached by
content; the description carries the versions, hints and precision."""

from __future__ import annotations

import numpy as np
import pytest

from kit.backends import BackendConfig, get_backend
from kit.backends import openvino_backend as ovb
from kit.errors import BackendUnavailable, InvalidParameter
from kit.hardware.environment import cpu_flags

pytest.importorskip("openvino")


@pytest.fixture(autouse=True)
def cache_env(small, monkeypatch):
    monkeypatch.setenv("KIT_CACHE", str(small.onnx_path.parent.parent))


@pytest.fixture(scope="module")
def reference(small):
    return get_backend("onnxruntime").load(small, BackendConfig(), 4).run(small.make_inputs(4))


def _rel(out, ref) -> float:
    return float(np.abs(out[0] - ref[0]).mean() / np.abs(ref[0]).mean())


def test_f32_matches_the_reference_with_static_shapes_and_provenance(small, reference):
    session = get_backend("openvino").load(small, BackendConfig("fp32", threads=1), 4)
    out = session.run(small.make_inputs(4))
    assert out[0].shape == reference[0].shape and _rel(out, reference) < 1e-4
    d = session.description
    assert (
        d["inference_precision"] == "f32"
        and d["performance_hint"] == "LATENCY"
        and d["threads"] == "1"
    )
    assert d["openvino_version"] and all(s[0] == 4 for s in d["static_shapes"].values())
    assert (small.onnx_path.parent.parent / "openvino").is_dir()  # OpenVINO's compiled-model cache


def test_the_throughput_hint_is_an_option_and_a_wrong_one_is_refused(small):
    session = get_backend("openvino").load(
        small, BackendConfig("fp32", options={"hint": "throughput"}), 2
    )
    assert session.description["performance_hint"] == "THROUGHPUT"
    call = session.bind(small.make_inputs(2))
    call()
    with pytest.raises(InvalidParameter, match="LATENCY"):
        get_backend("openvino").load(small, BackendConfig("fp32", options={"hint": "FAST"}), 2)


def test_a_16bit_type_the_cpu_lacks_is_refused_not_run_as_f32(small, monkeypatch):
    monkeypatch.setattr(ovb, "cpu_flags", lambda: {"avx2", "fma"})
    with pytest.raises(BackendUnavailable, match="avx512_bf16 or amx_bf16"):
        get_backend("openvino").load(small, BackendConfig("bf16"), 2)
    with pytest.raises(BackendUnavailable, match="avx512_fp16"):
        get_backend("openvino").load(small, BackendConfig("fp16"), 2)


def test_a_compiled_precision_other_than_the_one_asked_is_refused():
    with pytest.raises(BackendUnavailable, match="f32 where bf16"):
        ovb.check_ran_as_asked({"inference_precision": "f32"}, "bf16")
    ovb.check_ran_as_asked({"inference_precision": "bf16"}, "bf16")


@pytest.mark.skipif(
    not {"avx512_bf16", "amx_bf16"} & set(cpu_flags()), reason="no native bf16 on this CPU"
)
def test_bf16_runs_where_native(small, reference):
    session = get_backend("openvino").load(small, BackendConfig("bf16"), 4)
    assert session.description["inference_precision"] == "bf16"
    assert _rel(session.run(small.make_inputs(4)), reference) < 0.05


def test_fp8_and_a_missing_library_say_why(small, monkeypatch):
    with pytest.raises(InvalidParameter, match="int8"):
        get_backend("openvino").load(small, BackendConfig("fp8"), 1)
    monkeypatch.setattr(ovb.OpenVinoBackend, "module", "openvino_not_here")
    assert "openvino_not_here is not installed" in ovb.OpenVinoBackend().availability()


def test_nncf_int8_is_calibrated_on_seeded_inputs_and_cached_by_content(small, reference):
    pytest.importorskip("nncf")
    first = get_backend("openvino").load(small, BackendConfig("int8"), 4)
    conv = first.description["conversion"]
    assert (
        conv["nncf"]
        and "8 seeded batches of 1" in conv["calibration"]
        and conv["model_type"] == "default"
    )
    assert _rel(first.run(small.make_inputs(4)), reference) < 0.25
    xml = small.onnx_path.parent / conv["file"]
    assert xml.exists() and xml.with_suffix(".bin").exists()
    built = xml.stat().st_mtime_ns
    # one IR, reshaped per batch
    again = get_backend("openvino").load(small, BackendConfig("int8"), 2)
    assert (
        again.description["conversion"]["file"] == conv["file"] and xml.stat().st_mtime_ns == built
    )
    assert again.run(small.make_inputs(2))[0].shape[0] == 2
    other = get_backend("openvino").load(
        small, BackendConfig("int8", options={"nncf": "transformer"}), 2
    )
    # its own IR, beside the default's
    assert other.description["conversion"]["model_type"] == "transformer"
    assert (
        other.description["conversion"]["file"] != conv["file"]
        and "SmoothQuant" in other.description["conversion"]["method"]
    )
    with pytest.raises(InvalidParameter, match="nncf.*'cnn'.*default"):
        get_backend("openvino").load(small, BackendConfig("int8", options={"nncf": "cnn"}), 2)
    xml.with_suffix(".bin").unlink()  # a damaged entry is refused with the reason, never run
    with pytest.raises(BackendUnavailable, match="lost its weights"):
        get_backend("openvino").load(small, BackendConfig("int8"), 4)


def test_nncf_int8_weights_are_7_bit_where_the_cpu_s_int8_sums_saturate(tmp_path, monkeypatch):
    """NNCF's default fixes the overflow of CPUs without VNNI in the first convolution only: a
    MatMul's int8 output was 29 % off on an AVX2-only EPYC. There the kit applies the fix to every
    layer (7-bit weights), keyed in the IR's cache and said in its method; elsewhere 8-bit."""
    pytest.importorskip("nncf")
    import openvino as ov

    from tests.backends.test_onnx_conversion_cache import write_matmul

    model = write_matmul(tmp_path / "model.onnx", 256, seed=1)
    ranges, methods = {}, {}
    for saturates in (False, True):
        monkeypatch.setattr(ovb, "int8_saturates", lambda s=saturates: s)
        xml, record = ovb.quantized_ir(ov.Core(), model)
        weights = [
            op.get_data()
            for op in ov.Core().read_model(str(xml)).get_ops()
            if op.get_type_name() == "Constant" and op.get_element_type() == ov.Type.i8
        ]
        ranges[saturates] = max(int(np.abs(w.astype(np.int32)).max()) for w in weights)
        methods[saturates] = record["method"]
    assert ranges[False] == 127 and ranges[True] <= 64
    assert "7-bit weights" in methods[True] and "8-bit weights" in methods[False]


def test_the_compiled_model_cache_keeps_the_newest_blobs_under_its_size_limit(tmp_path):
    import os

    from kit.cache import prune_oldest

    for i, size in enumerate([400, 300, 200, 100]):  # oldest first
        blob = tmp_path / f"{i}.blob"
        blob.write_bytes(b"x" * size)
        os.utime(blob, ns=(10**9 * (i + 1), 10**9 * (i + 1)))
    (tmp_path / "other.json").write_text("{}")
    deleted = prune_oldest(tmp_path, "*.blob", 350)
    assert [p.name for p in deleted] == ["0.blob", "1.blob"]  # 1000 -> 300 bytes, the oldest first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["2.blob", "3.blob", "other.json"]
    assert prune_oldest(tmp_path, "*.blob", 0) == [tmp_path / "2.blob"]  # the newest is always kept
    assert [p.name for p in tmp_path.glob("*.blob")] == ["3.blob"]


def test_the_cache_limit_comes_from_the_environment_and_bad_values_are_refused(small, monkeypatch):
    monkeypatch.setenv("KIT_OPENVINO_CACHE_GB", "0")
    assert ovb.blob_cache_gb() == 0
    session = get_backend("openvino").load(small, BackendConfig("fp32"), 1)
    assert session.description["compiled_cache"].startswith("off")
    monkeypatch.setenv("KIT_OPENVINO_CACHE_GB", "2.5")
    assert ovb.blob_cache_gb() == 2.5
    for bad in ("lots", "-1", "nan", "inf"):
        monkeypatch.setenv("KIT_OPENVINO_CACHE_GB", bad)
        with pytest.raises(InvalidParameter, match=f"KIT_OPENVINO_CACHE_GB='{bad}'"):
            ovb.blob_cache_gb()
    monkeypatch.delenv("KIT_OPENVINO_CACHE_GB")
    assert ovb.blob_cache_gb() == ovb.CACHE_GB


def test_kit_reproduce_stops_on_a_bad_cache_limit_before_running_anything(
    outputs, monkeypatch, capsys
):
    from kit.cli.main import main

    monkeypatch.setenv("KIT_OPENVINO_CACHE_GB", "lots")
    assert main(["reproduce", "--hardware", "cpu", "--only", "summary"]) == 2
    assert "invalid KIT_OPENVINO_CACHE_GB='lots'" in capsys.readouterr().err
    assert not (outputs / "runs").exists() or not any((outputs / "runs").iterdir())
