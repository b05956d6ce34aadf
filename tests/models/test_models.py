"""Every zoo entry: published input specs, small export + verification, full-size parameter
counts."""

import csv
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from kit.errors import UnknownNameError
from kit.models import export_model, get_entry, model_names

PUBLISHED = Path(__file__).parents[1] / "data" / "published_inputs.csv"
NOT_IN_BYTEMLPERF = {"resnext101-c2"}  # the Qwant C2 study's model, not a ByteMLPerf row
ONNX_DTYPES = {1: "float32", 7: "int64", 6: "int32", 9: "bool"}


def published() -> dict[str, dict[str, dict]]:
    table: dict[str, dict[str, dict]] = {}
    for row in csv.DictReader(PUBLISHED.open()):
        shape = tuple(int(x) for x in row["shape"].split("x"))
        table.setdefault(row["model"], {})[row["input_name"]] = {
            "shape": shape,
            "dtype": row["dtype"],
            "batched": row["batched"] == "True",
        }
    return table


@pytest.fixture(scope="session")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("model-cache")


def test_registry_covers_every_published_workload():
    assert set(published()) | NOT_IN_BYTEMLPERF == set(model_names())


@pytest.mark.parametrize("name", sorted(set(model_names()) - NOT_IN_BYTEMLPERF))
def test_entry_inputs_match_published_spec(name):
    entry = get_entry(name)
    expected = published()[name]
    assert {i.name for i in entry.inputs} == set(expected)
    for spec in entry.inputs:
        row = expected[spec.name]
        assert (spec.shape, spec.dtype, spec.batched) == (
            row["shape"],
            row["dtype"],
            row["batched"],
        )


def test_unknown_model_lists_known_ones():
    with pytest.raises(UnknownNameError, match="known: .*bert-torch-fp32"):
        export_model("gpt-17")


def onnx_inputs(path: Path) -> dict[str, tuple[str, int]]:
    proto = onnx.load(str(path), load_external_data=False)
    return {
        v.name: (ONNX_DTYPES[v.type.tensor_type.elem_type], len(v.type.tensor_type.shape.dim))
        for v in proto.graph.input
    }


@pytest.mark.parametrize("name", model_names())
def test_small_export_matches_spec_and_verifies(name, cache):
    model = export_model(name, small=True, cache=cache)
    entry = get_entry(name)
    expected = published().get(
        name, {i.name: {"dtype": i.dtype, "shape": i.shape} for i in entry.inputs}
    )
    assert onnx_inputs(model.onnx_path) == {
        n: (r["dtype"], len(r["shape"])) for n, r in expected.items()
    }
    assert model.verification["checker"] == "passed"
    assert model.verification["ort_max_abs_diff"] < 1e-4
    assert model.flops_per_sample and model.flops_per_sample > 0
    assert model.params and model.params > 0
    assert model.weights.is_random and "not meaningful" in model.weights.label
    # dynamic batch: batch 3 runs and every output's first dim is 3
    session = ort.InferenceSession(str(model.onnx_path), providers=["CPUExecutionProvider"])
    outputs = session.run(None, model.make_inputs(3))
    assert [o.shape[0] for o in outputs] == [3] * len(outputs)
    assert all(np.isfinite(o).all() for o in outputs)


def test_second_export_reuses_the_cache(cache):
    first = export_model("resnet50-torch-fp32", small=True, cache=cache)
    mtime = first.onnx_path.stat().st_mtime_ns
    started = time.perf_counter()
    again = export_model("resnet50-torch-fp32", small=True, cache=cache)
    assert again.onnx_path == first.onnx_path and again.onnx_path.stat().st_mtime_ns == mtime
    assert again.flops_per_sample == first.flops_per_sample
    assert time.perf_counter() - started < 1.0


def test_input_generators_stay_in_range():
    feeds = get_entry("widedeep-tf-fp32").inputs[0].generate(4, np.random.default_rng(0))
    assert feeds.shape == (104, 2) and feeds.min() >= 0 and feeds.max() < 10000
    token = get_entry("roformer-tf-fp32").inputs[0].generate(2, np.random.default_rng(0))
    assert token.dtype == np.float32 and np.all(token == np.round(token)) and token.max() < 50000
    ids = get_entry("bert-torch-fp32").inputs
    batch = {s.name: s.generate(2, np.random.default_rng(0)) for s in ids}
    assert batch["input_ids.1"].max() < 30522 and np.all(batch["attention_mask.1"] == 1)
    assert (
        get_entry("roberta-torch-fp32").inputs[2].generate(2, np.random.default_rng(0)).max() == 0
    )


TORCH_FULL = [
    "resnet50-torch-fp32",
    "resnext101-c2",
    "swin-large-torch-fp32",
    "bert-torch-fp32",
    "albert-torch-fp32",
    "roberta-torch-fp32",
    "deberta-torch-fp32",
    "clip-onnx-fp32",
    "videobert-onnx-fp32",
]


@pytest.mark.parametrize("name", TORCH_FULL)
def test_full_size_parameter_count_matches_published_architecture(name):
    """Built on torch's meta device: full-size shapes without allocating or initialising weights."""
    import torch

    entry = get_entry(name)
    with torch.device("meta"):
        model = entry.build(small=False)
    params = sum(p.numel() for p in model.parameters())
    assert params == pytest.approx(entry.reference_params, rel=0.02)


def test_published_reference_counts():
    refs = {
        n: get_entry(n).reference_params
        for n in (
            "resnext101-c2",
            "resnet50-torch-fp32",
            "bert-torch-fp32",
            "swin-large-torch-fp32",
        )
    }
    assert refs == {
        "resnext101-c2": 44.2e6,
        "resnet50-torch-fp32": 25.6e6,
        "bert-torch-fp32": 110e6,
        "swin-large-torch-fp32": 197e6,
    }


@pytest.mark.slow
def test_full_size_roformer_parameter_count():
    from kit.models.keras_models import RoFormerConfig, roformer_classifier

    assert roformer_classifier(RoFormerConfig()).count_params() == pytest.approx(124e6, rel=0.02)


@pytest.mark.parametrize("how", ["half", "autocast"])
def test_conformer_runs_in_fp16_with_padded_frames(how):
    """masked_fill(-1e9) overflowed fp16: the torch fp16 path crashed with 'value cannot be
    converted to type c10::Half without overflow'."""
    import torch

    from kit.models.conformer import conformer_encoder

    torch.manual_seed(0)
    model = conformer_encoder(small=True).eval()
    src, pad = torch.randn(2, 3, 64, 512), torch.zeros(2, 128, dtype=torch.bool)
    pad[1, 100:] = True
    with torch.no_grad():
        reference = model(src, pad)
        if how == "half":
            out = model.half()(src.half(), pad).float()
        else:
            with torch.autocast("cpu", dtype=torch.float16):
                out = model(src, pad).float()
    assert torch.isfinite(out).all()
    assert (out - reference).abs().max() < 0.05 * reference.abs().mean()


def test_a_zoo_entry_and_an_export_hold_a_framework_not_a_string():
    import dataclasses

    from kit.errors import UnknownValueError
    from kit.models.spec import ExportedModel, Framework, WeightsInfo

    assert {get_entry(name).framework for name in model_names()} == {
        Framework.TORCH,
        Framework.TENSORFLOW,
    }
    user = ExportedModel(
        name="mine.onnx",
        onnx_path=Path("mine.onnx"),
        inputs=(),
        outputs=(),
        weights=WeightsInfo("user", "mine.onnx"),
        framework="tensorflow",  # as an export's metadata holds it
    )
    assert user.framework is Framework.TENSORFLOW and not user.framework.torch_module
    with pytest.raises(UnknownValueError, match="unknown framework 'keras'"):
        dataclasses.replace(user, framework="keras")
    with pytest.raises(UnknownValueError, match="unknown framework 'jax'"):
        dataclasses.replace(get_entry("resnet50-torch-fp32"), framework="jax")
