"""Every torch zoo model (small) run as the GPU candidates run it, through kit's torch backend and
tests/cuda_double.py: captured in one CUDA graph, and its eager host-to-host call reading no device
value back; then each capture rule of the double, broken on purpose in the kit's forward."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from cuda_double import CaptureError, install, uninstall

from kit.backends import BackendConfig, get_backend, torch_backend
from kit.backends.torch_cuda import GraphCall, pinned_host_inputs
from kit.errors import BackendUnavailable
from kit.hardware import cuda as kit_cuda
from kit.models import MODELS, hf
from kit.models.spec import ExportedModel, WeightsInfo

TORCH_MODELS = [name for name in MODELS.names() if MODELS.get(name).framework == "torch"]
GRAPH = BackendConfig("fp16", "cuda", options={"cuda_graph": True})


@pytest.fixture
def gpu(monkeypatch):
    """torch sees a GPU (the double); transformers does not see the capture. It asks
    `torch.cuda.is_current_stream_capturing()` (the double answers as CUDA does) and then skips its
    host reads, but not every version or code path asks: the kit's models must capture either
    way."""
    import transformers.utils.import_utils as hf_utils

    double = install(monkeypatch)
    monkeypatch.setattr(hf_utils, "is_cuda_stream_capturing", lambda: False)
    card = kit_cuda.CudaDevice(0, "00000000:01:00.0", "NVIDIA H200")
    monkeypatch.setattr(torch_backend, "torch_device", lambda config: ("cpu", card))
    yield double
    uninstall(double)


def small_model(name: str) -> ExportedModel:
    """The zoo entry as a session loads it (the torch backend builds the framework model, not the
    file)."""
    entry = MODELS.get(name)
    return ExportedModel(
        name=name,
        onnx_path=Path("unused.onnx"),
        inputs=entry.inputs_for(True),
        outputs=entry.outputs,
        weights=WeightsInfo("random", "seed 0"),
        small=True,
        framework="torch",
        task=entry.task,
    )


def eager_reads(double, model: ExportedModel) -> int:
    """Device values the eager host-to-host call reads back on the host (a round trip each)."""
    call = (
        get_backend("torch")
        .load(model, BackendConfig("fp16", "cuda"), 2)
        .bind(model.make_inputs(2))
    )
    before = double.reads
    call()
    return double.reads - before


@pytest.mark.parametrize("name", TORCH_MODELS)
def test_every_torch_zoo_model_captures_and_reads_nothing_back(name, gpu):
    model = small_model(name)
    captures = gpu.captures
    session = get_backend("torch").load(model, GRAPH, 2)
    assert (
        gpu.captures == captures + 1 and "captured in one CUDA graph" in session.description["mode"]
    )
    assert eager_reads(gpu, model) == 0


def test_without_the_additive_mask_bert_neither_captures_nor_runs_without_a_round_trip(
    gpu, monkeypatch
):
    """transformers' own mask code reads the 2D mask back (`padding_mask.all()`) every call; the
    failure names that frame."""
    monkeypatch.setattr(hf, "additive_mask", lambda mask, dtype: mask)
    model = small_model("bert-torch-fp32")
    with pytest.raises(
        BackendUnavailable,
        match=r"is_nonzero.*reads a device value.*\) at .*transformers"
        r"/masking_utils.py:\d+ _ignore_bidirectional_mask_sdpa",
    ):
        get_backend("torch").load(model, GRAPH, 2)
    assert eager_reads(gpu, model) == 1


# ---------------------------------------- each capture rule, broken on purpose in the kit's forward


def reads_mask_on_host(t):
    return t * 2 if bool((t > -100).all()) else t


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        (reads_mask_on_host, "is_nonzero.*reads a device value"),
        (lambda t: t * float(t.sum()), "(item|_local_scalar_dense).*reads a device value"),
        (lambda t: t * int(torch.equal(t, t)), "equal.*reads a device value"),
        (lambda t: t * len(t.nonzero()), "nonzero.*reads a device value"),
        (lambda t: t * t.max().item(), "(item|_local_scalar_dense).*waits for the GPU"),
        (
            lambda t: t + torch.tensor(0.0, device=t.device),
            "torch.tensor/as_tensor on cpu: a copy from pageable",
        ),
        (
            lambda t: t + torch.as_tensor(np.zeros(1, np.float16), device=t.device),
            "as_tensor on cpu",
        ),
        (
            lambda t: t + torch.tensor([0.0, 1.0], dtype=t.dtype)[:, None, None, None],
            "a copy from pageable host memory",
        ),
        (lambda t: t[[0, 1]], "a host index into a device tensor"),
        (lambda t: t[torch.tensor([1, 0])], "a host index into a device tensor"),
        (lambda t: t[t > 0].sum() + t, "a boolean mask index reads its count back"),
    ],
)
def test_each_capture_rule_fails_a_kit_forward_that_breaks_it(gpu, monkeypatch, broken, message):
    """The refusal and the kit's message name the rule and the frame that broke it (this file)."""
    real = torch_backend.TorchSession.device_outputs

    def breaking(self, tensors):
        return real(self, [broken(tensors[0]), *tensors[1:]])

    monkeypatch.setattr(torch_backend.TorchSession, "device_outputs", breaking)
    model = small_model("resnet50-torch-fp32")
    get_backend("torch").load(model, BackendConfig("fp16", "cuda"), 2).bind(
        model.make_inputs(2)
    )()  # eager runs it
    with pytest.raises(
        BackendUnavailable, match=f"capture failed .*{message}.*\\) at .*test_zoo_capture.py:\\d+"
    ):
        get_backend("torch").load(model, GRAPH, 2)


@pytest.mark.parametrize(
    "allowed",
    [
        # a host 0-dim scalar: read on the host at launch
        lambda t: t * torch.tensor(2.0, dtype=t.dtype),
        lambda t: t[:, :, : int(torch.tensor(3) - 1)],  # host arithmetic, a host value as a size
        lambda t: t + torch.as_tensor(t),  # already a device tensor: no copy
        lambda t: t[torch.arange(2, device=t.device)],  # a device index
        lambda t: t * torch.zeros((), device=t.device, dtype=t.dtype),  # made on the device
    ],
)
def test_what_a_capture_allows_the_double_allows(gpu, allowed):
    host = pinned_host_inputs([np.ones((2, 3, 4, 4), np.float32)], None)
    GraphCall(lambda tensors: [allowed(tensors[0])], host, "cpu")
    assert gpu.captures == 1


def test_the_double_says_when_a_capture_is_under_way_and_counts_reads_outside_one(gpu):
    seen = []
    host = pinned_host_inputs([np.ones(2, np.float32)], None)
    GraphCall(
        lambda tensors: seen.append(torch.cuda.is_current_stream_capturing()) or [tensors[0] + 1],
        host,
        "cpu",
    )
    assert seen[-1] is True and seen[0] is False  # the warm-up calls run before the capture
    before = gpu.reads
    assert bool(torch.ones(2).all()) and gpu.reads == before + 1  # a device value, read on the host
    assert bool(torch.tensor(True)) and gpu.reads == before + 1  # a host value


def test_a_capture_error_is_raised_by_the_double_not_by_torch(gpu):
    host = pinned_host_inputs([np.ones(2, np.float32)], None)
    with pytest.raises(CaptureError, match="a host index into a device tensor"):
        GraphCall(lambda tensors: [tensors[0][[0]]], host, "cpu")
