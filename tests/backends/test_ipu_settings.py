"""ByteMLPerf's IPU settings as data, applied as ByteMLPerf applies them (one test per row kind)."""

from __future__ import annotations

import json

import pytest

from kit.backends.ipu.settings import merged_settings, models, plan_for, require_plan
from kit.errors import UnknownNameError
from kit.paths import published_dir
from kit.published import figures as published

MODELS = [
    "albert-torch-fp32",
    "bert-torch-fp32",
    "clip-onnx-fp32",
    "conformer-encoder-onnx-fp32",
    "deberta-torch-fp32",
    "resnet50-torch-fp32",
    "roberta-torch-fp32",
    "roformer-tf-fp32",
    "swin-large-torch-fp32",
    "videobert-onnx-fp32",
    "widedeep-tf-fp32",
]


def test_eleven_models_loaded_from_data_with_source():
    assert models() == MODELS
    raw = published.ipu_model_settings("clip-onnx-fp32")
    on_disk = json.loads(
        (published_dir() / "bytemlperf_ipu_settings" / "clip-onnx-fp32.json").read_text()
    )
    assert raw["settings"] == on_disk and "a30b4f9" in raw["source"]
    with pytest.raises(UnknownNameError, match="resnet50-torch-fp32"):
        published.ipu_model_settings("yolov5-onnx-fp32")
    assert plan_for("resnext101-c2", "fp16") is None
    with pytest.raises(UnknownNameError):
        require_plan("resnext101-c2", "fp16")


@pytest.mark.parametrize("model", MODELS)
def test_every_compiler_option_is_applied_under_poprt_names(model):
    plan = plan_for(model, "fp16")
    given = published.ipu_model_settings(model)["settings"].get("compiler_options", {})
    assert "num_iotiles" not in plan.compiler_options and len(plan.compiler_options) == 12
    for key, value in given.items():
        assert plan.compiler_options["num_io_tiles" if key == "num_iotiles" else key] == value
    assert plan.converter_options["precision"] == "fp16"


def test_fallbacks_are_bytemlperfs_not_poprts():
    opts = plan_for("roformer-tf-fp32", "fp16").compiler_options
    # ByteMLPerf's fallback (PopRT defaults to True)
    assert opts["enable_prefetch_datastreams"] is False
    assert (
        opts["num_io_tiles"] == 0
        and opts["batches_per_step"] == 1
        and opts["available_memory_proportion"] == 0.6
    )


def test_fp8_configs_merge_over_the_base():
    bert = plan_for("bert-torch-fp32", "fp8")
    assert bert.pack["batch_size"] == 45 and bert.pack["max_valid_num"] == 120
    assert bert.converter_options["fp8_params"] == "F143,F143,0,0"
    assert (
        bert.converter_options["fp8_skip_op_names"]
        == "/model/bert/embeddings/word_embeddings/Gather"
    )
    assert bert.compiler_options["available_memory_proportion"] == 0.6
    assert (
        plan_for("bert-torch-fp32", "fp16").compiler_options["available_memory_proportion"] == 0.4
    )
    swin = plan_for("swin-large-torch-fp32", "fp8")
    assert swin.batch_sizes == (4,) and swin.converter_options["enable_insert_remap"] is True
    assert plan_for("swin-large-torch-fp32", "fp16").batch_sizes == (2,)
    assert "fp8_configs" not in merged_settings(
        published.ipu_model_settings("resnet50-torch-fp32")["settings"], "fp16"
    )


def test_pack_config_as_bytemlperf_runs_it():
    pack = plan_for("albert-torch-fp32", "fp16").pack
    assert (
        pack["batch_size"] == 40
        and pack["max_valid_num"] == 100
        and pack["timeout_microseconds"] == 15000
    )
    assert pack["algorithm"] == "first_fit" and pack["mask_name"] == "attention_mask.1"
    assert pack["model_inputs"] == {"add": "position_ids", "position_offset": 0}
    assert plan_for("roberta-torch-fp32", "fp16").pack["model_inputs"]["position_offset"] == 1
    assert plan_for("bert-torch-fp32", "fp16").clients == 1  # no clients key: ByteMLPerf's 1


def test_a_missing_custom_pass_makes_the_row_not_comparable():
    plan = plan_for("deberta-torch-fp32", "fp16")
    assert plan.missing_passes == ("deberta_pack",) and not plan.comparable
    assert "deberta_pack" not in plan.converter_options["used_passes"]
    assert any("'deberta_pack'" in n and "not comparable" in n for n in plan.notes)
    assert plan_for("bert-torch-fp32", "fp16").converter_options["used_passes"] == [
        "insert_attention_mask"
    ]
    assert plan_for("roformer-tf-fp32", "fp16").comparable  # its five passes are PopRT built-ins


def test_a_precision_bytemlperf_never_ran_is_not_comparable():
    assert plan_for("resnet50-torch-fp32", "fp8").comparable
    clip = plan_for("clip-onnx-fp32", "fp8")
    assert not clip.comparable and clip.notes[0].startswith(
        "not comparable: ByteMLPerf runs clip-onnx-fp32 at fp16"
    )
