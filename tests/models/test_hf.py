"""kit.models.hf: the additive masks the wrappers hand transformers give the plain model's outputs,
leave transformers no mask to build, and export as the chain ByteMLPerf's IPU pass rewrites."""

from __future__ import annotations

import onnx
import pytest
import torch
from onnx_graphs import MASK_CHAIN, mask_chain

from kit.models import MODELS
from kit.models.build import export_torch
from kit.models.spec import make_inputs

MASKED = ["bert-torch-fp32", "albert-torch-fp32", "roberta-torch-fp32"]
TEXT = ["clip-onnx-fp32", "videobert-onnx-fp32"]


def inputs(name: str, dtype: torch.dtype) -> list[torch.Tensor]:
    """Batch 3, the QA masks padded (the first sample from token 200, the third from token 5)."""
    feeds = [
        torch.from_numpy(v)
        for v in make_inputs(MODELS.get(name).inputs_for(True), 3, seed=1).values()
    ]
    if name in MASKED or name == "deberta-torch-fp32":
        feeds[1][0, 200:] = 0
        feeds[1][2, 5:] = 0
    return [t.to(dtype) if t.is_floating_point() else t for t in feeds]


def plain(wrapper, name: str, feeds: list[torch.Tensor]) -> tuple:
    """What the transformers model gives for the same inputs with its own mask code."""
    if name in TEXT[:1]:
        out = wrapper.model(input_ids=feeds[0].long())
        return out.last_hidden_state, out.pooler_output
    if name in TEXT:
        return (
            wrapper.model(input_ids=feeds[1], pixel_values=feeds[0]).logits_per_image.softmax(
                dim=-1
            ),
        )
    types = feeds[2] if wrapper.use_token_types else feeds[2] * 0
    out = wrapper.model(input_ids=feeds[0], attention_mask=feeds[1], token_type_ids=types)
    return out.start_logits, out.end_logits


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("name", [*MASKED, "deberta-torch-fp32", *TEXT])
def test_the_wrapped_models_give_the_plain_models_outputs_exactly(name, dtype):
    wrapper = MODELS.get(name).build(small=True).to(dtype)
    feeds = inputs(name, dtype)
    with torch.inference_mode():
        got, want = wrapper(*feeds), plain(wrapper, name, feeds)
    got = got if isinstance(got, tuple) else (got,)
    assert len(got) == len(want) and all(torch.equal(g, w) for g, w in zip(got, want, strict=True))


@pytest.mark.parametrize("name", [*MASKED, *TEXT])
def test_transformers_builds_no_mask_for_the_wrapped_models(name, monkeypatch):
    """Each mask transformers is handed is 4D, returned as it is: none built, nothing read back."""
    from transformers import masking_utils

    real, early_exits = masking_utils._preprocess_mask_arguments, []

    def spy(*args, **kwargs):
        out = real(*args, **kwargs)
        early_exits.append(out[0])
        return out

    monkeypatch.setattr(masking_utils, "_preprocess_mask_arguments", spy)
    with torch.inference_mode():
        MODELS.get(name).build(small=True)(*inputs(name, torch.float32))
    assert early_exits and all(early_exits)


@pytest.fixture(scope="module")
def exports(tmp_path_factory) -> dict:
    """Small exports at the IPU's opset (11), as the kit's export writes them."""
    folder, paths = tmp_path_factory.mktemp("exports"), {}
    for name in [*MASKED, "clip-onnx-fp32"]:
        entry = MODELS.get(name)
        paths[name] = folder / f"{name}.onnx"
        export_torch(
            entry.build(small=True), paths[name], entry.inputs_for(True), entry.outputs, 11
        )
    return paths


@pytest.mark.parametrize("name", MASKED)
def test_the_export_keeps_bytemlperfs_mask_chain_on_the_mask_input(name, exports):
    chain, one, scale = mask_chain(exports[name], "attention_mask.1")
    assert MASK_CHAIN.match(chain), chain  # Unsqueeze-Unsqueeze-Cast-Sub-Mul
    assert one == 1.0 and scale == torch.finfo(torch.float32).min


def test_clips_causal_mask_is_a_buffer_made_additive_in_the_graph(exports):
    graph = onnx.load(str(exports["clip-onnx-fp32"])).graph  # the buffer: a Constant (not a weight)
    (causal,) = [
        n.output[0]
        for n in graph.node
        if n.op_type == "Constant" and list(n.attribute[0].t.dims) == [1, 1, 77, 77]
    ]
    chain, one, scale = mask_chain(exports["clip-onnx-fp32"], causal)
    assert chain.endswith("Cast-Sub-Mul") and set(chain.split("-")[:-3]) == {"Slice"}, chain
    assert one == 1.0 and scale == torch.finfo(torch.float32).min
