"""kit.search.precision_map: published IPU precisions -> backend/precision/device here, with the
note."""

from __future__ import annotations

import pytest

from kit.backends import Placement
from kit.errors import InvalidParameter, UnknownValueError
from kit.search.precision_map import map_precision, mapping_sentence

ZEN4 = {"avx2", "avx512f", "avx512_vnni", "avx512_bf16"}
SPR_FP16 = ZEN4 | {"amx_bf16", "amx_int8", "avx512_fp16"}
OLD = {"avx2"}


def test_fp16_on_bf16_cpu_is_torch_bf16():
    choice = map_precision("FP16", "cpu", flags=ZEN4)
    assert choice.placement == Placement("torch", "bf16", "cpu") and "bf16" in choice.note


def test_fp16_for_non_torch_model_uses_ort_fp16():
    choice = map_precision("FP16", "cpu", framework="tensorflow", flags=ZEN4)
    assert (choice.placement.backend, choice.placement.precision) == ("onnxruntime", "fp16")
    assert "not native" in choice.note


def test_native_fp16_cpu_and_no_16bit_cpu():
    assert map_precision("fp16", "cpu", flags=SPR_FP16).placement.precision == "fp16"
    old = map_precision("FP16", "cpu", flags=OLD)
    assert (old.placement.backend, old.placement.precision) == (
        "onnxruntime",
        "fp32",
    ) and "no native 16-bit" in old.note


def test_fp8_on_cpu_is_int8():
    assert map_precision("FP8", "cpu", flags=ZEN4).placement == Placement("onnxruntime", "int8")
    assert "VNNI" in map_precision("FP8", "cpu", flags=ZEN4).note
    assert "without VNNI" in map_precision("FP8", "cpu", flags=OLD).note


def test_gpu_mapping():
    assert map_precision("FP16", "cuda").placement == Placement("torch", "fp16", "cuda")
    assert map_precision("FP16", "cuda", framework="onnx").placement == Placement(
        "onnxruntime", "fp16", "cuda"
    )
    trt = map_precision("FP8", "cuda", gpu_providers=["TensorrtExecutionProvider"])
    assert trt.placement == Placement("onnxruntime", "int8", "tensorrt")
    assert map_precision("FP8", "cuda").placement.precision == "fp16"


def test_ipu_runs_as_published_and_fp32_is_fp32():
    assert map_precision("FP8", "ipu").placement == Placement("ipu", "fp8", "ipu")
    assert map_precision("FP32", "cpu").placement.precision == "fp32"


def test_bad_values_name_allowed():
    with pytest.raises(
        UnknownValueError, match="published precision 'INT4'; known: FP16, FP32, FP8"
    ):
        map_precision("INT4", "cpu")
    with pytest.raises(InvalidParameter, match="one of"):
        map_precision("FP16", "tpu")


def test_sentence_states_both_mappings():
    s = mapping_sentence("cpu", flags=ZEN4)
    assert (
        "FP16 rows run here as bf16 (torch, cpu)" in s
        and "FP8 rows as int8 (onnxruntime, cpu)" in s
    )
    assert "published precision" in mapping_sentence("ipu")


def test_a_framework_outside_the_kits_is_refused_by_name_not_run_as_onnx():
    from kit.models.spec import Framework
    from kit.search.candidates import row_candidates

    for call in (
        lambda: map_precision("FP16", "cpu", framework="pytorch", flags=ZEN4),
        lambda: row_candidates("pytorch", flags=ZEN4),
        lambda: mapping_sentence("cpu", ZEN4, framework="PyTorch"),
    ):
        with pytest.raises(
            UnknownValueError,
            match="unknown framework '[Pp]y[Tt]orch'; known: onnx, tensorflow, torch",
        ):
            call()
    # the enum is the string the metadata holds: a record written as "torch" still compares equal
    assert Framework.parse("torch") == "torch" and Framework.TORCH.torch_module
    assert not Framework.TENSORFLOW.torch_module and not Framework.ONNX.torch_module
    torch_only = {c.label for c in row_candidates(Framework.TORCH, flags=ZEN4)} - {
        c.label for c in row_candidates("onnx", flags=ZEN4)
    }
    assert torch_only and all(label.startswith("torch ") for label in torch_only)
