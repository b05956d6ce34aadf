"""ByteMLPerf's fp8 skip names resolved on the kit's graphs, and its passes judged by their ops."""

from __future__ import annotations

import pytest

from kit.backends.ipu.graph import (
    INPUT_CAST,
    PASS_CHECKS,
    check_passes,
    module_path,
    not_comparable_reasons,
    resolve_fp8_skips,
)
from kit.errors import InvalidParameter

KIT_RESNET = [
    "/conv1/Conv",
    "/layer1/layer1.0/downsample/downsample.0/Conv",
    "/layer1/layer1.0/conv1/Conv",
    "/layer2/layer2.0/downsample/downsample.0/Conv",
]


def test_module_paths_of_both_torch_naming_styles_agree():
    assert (
        module_path("/layer1/0/downsample/0/Conv")
        == module_path(KIT_RESNET[1])
        == "layer1.0.downsample.0/Conv"
    )
    assert (
        module_path("/model/bert/embeddings/word_embeddings/Gather")
        == "model.bert.embeddings.word_embeddings/Gather"
    )
    assert module_path("Conv_12") == "Conv_12"


def test_bytemlperf_skip_names_resolve_to_the_kits_nodes():
    assert resolve_fp8_skips("/layer1/0/downsample/0/Conv", KIT_RESNET, "resnet50") == {
        "/layer1/0/downsample/0/Conv": "/layer1/layer1.0/downsample/downsample.0/Conv"
    }
    assert resolve_fp8_skips(" /conv1/Conv ,", KIT_RESNET, "resnet50") == {
        "/conv1/Conv": "/conv1/Conv"
    }


def test_a_skip_name_of_no_node_is_an_error_with_the_closest_nodes():
    with pytest.raises(InvalidParameter) as err:
        resolve_fp8_skips("/layer3/0/downsample/0/Conv", KIT_RESNET, "resnet50")
    assert str(err.value).startswith(
        "invalid fp8_skip_op_names='/layer3/0/downsample/0/Conv': a node of "
        "resnet50's exported graph (no node has it); closest: "
    )
    with pytest.raises(InvalidParameter, match="2 nodes share its module path"):
        resolve_fp8_skips("/a/0/Conv", ["/a/a.0/Conv", "/a/0/Conv_x", "/a.0/Conv"], "m")


def test_each_bytemlperf_pass_has_a_check():
    used = {
        "insert_attention_mask",
        "fused_attention",
        "matmul_rotary_embedding",
        "pre_scale",
        # every used_passes entry of the settings
        "remove_input_cast",
        "replace_groupnorm_with_fast_norm",
    }
    assert used <= set(PASS_CHECKS)


def test_passes_are_judged_by_the_ops_they_leave():
    """Each pass against the same conversion with it skipped: `without` is that graph."""
    without = {
        "MatMul": 18,
        "Split": 0,
        "Neg": 9,
        "Mul": 37,
        "Div": 2,
        "Cast": 39,
        "Reshape": 38,
        INPUT_CAST: 2,
    }
    fired = {
        "MatMul": 12,
        "Split": 6,
        "Neg": 0,
        "Mul": 30,
        "Div": 0,
        "Cast": 45,
        "AttentionMask": 1,
        "FastNorm": 5,
    }  # more Casts overall (fp16 conversion), none reading an input
    passes = list(PASS_CHECKS)
    each = dict.fromkeys(passes, without)
    assert {n: r["applied"] for n, r in check_passes(passes, fired, each).items()} == dict.fromkeys(
        passes, "yes"
    )
    assert not not_comparable_reasons(check_passes(passes, fired, each))
    unchanged = check_passes(passes, without, each)
    assert {r["applied"] for r in unchanged.values()} == {"no"}
    reasons = not_comparable_reasons(unchanged)
    assert (
        len(reasons) == len(passes)
        and "'fused_attention'" in reasons[1]
        and "did not fire" in reasons[1]
    )
    assert (
        check_passes(["insert_attention_mask"], None, None)["insert_attention_mask"]["applied"]
        == "not checked"
    )
    assert check_passes(["pre_scale"], fired, {})["pre_scale"]["applied"] == "not checked"


def test_the_worker_counts_casts_of_graph_inputs_under_the_kits_name(tmp_path):
    import onnx

    from kit.backends.ipu.poprt_worker import convert
    from tests.ipu_helpers import tiny_model

    assert convert.INPUT_CAST == INPUT_CAST
    counts = convert.op_types(onnx.load(str(tiny_model(tmp_path / "tiny.onnx"))))
    assert counts["Cast"] == 1 and counts[INPUT_CAST] == 1 and counts["MatMul"] == 1
