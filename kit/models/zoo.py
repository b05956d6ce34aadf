"""The model registry: one entry per published workload, keyed by ByteMLPerf's name."""

from __future__ import annotations

from pathlib import Path

from kit.models.spec import InputSpec, ModelEntry
from kit.registry import Registry

MODELS: Registry[ModelEntry] = Registry("model")


def _load_torch_state(model, weights_dir: Path | None):
    if weights_dir is not None:
        import torch

        path = next(p for p in (weights_dir / "model.pt", weights_dir / "pytorch_model.bin") if p.exists())
        model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    return model.eval()


def _seeded(seed: int) -> None:
    import torch

    torch.manual_seed(seed)


def build_resnet50(small: bool = False, weights_dir: Path | None = None, seed: int = 0):
    from kit.models.resnet import resnet50

    _seeded(seed)
    return _load_torch_state(resnet50(small=small), weights_dir)


def build_resnext101(small: bool = False, weights_dir: Path | None = None, seed: int = 0):
    from kit.models.resnet import resnext101_32x4d

    _seeded(seed)
    return _load_torch_state(resnext101_32x4d(small=small), weights_dir)


IMAGE_224 = InputSpec("input_1.1", (1, 3, 224, 224), "float32", low=-2.0, high=2.0)
IMAGE_SMALL = InputSpec("input_1.1", (1, 3, 32, 32), "float32", low=-2.0, high=2.0)

MODELS.register("resnet50-torch-fp32", ModelEntry(
    name="resnet50-torch-fp32", framework="torch", task="image-classification",
    inputs=(IMAGE_224,), outputs=("softmax_tensor:0",), build=build_resnet50,
    description="ResNet-50 v1.5 (torchvision layout), softmax output", dataset="open_imagenet",
    metric="Top-1", hub_id=None, reference_params=25.6e6, small_inputs=(IMAGE_SMALL,),
))

MODELS.register("resnext101-c2", ModelEntry(
    name="resnext101-c2", framework="torch", task="image-classification",
    inputs=(InputSpec("input", (1, 3, 224, 224), "float32", low=-2.0, high=2.0),),
    outputs=("logits",), build=build_resnext101,
    description="ResNeXt-101 32x4d (the Qwant C2 study's model, 44M parameters)",
    dataset="coco_val_subset", metric="", reference_params=44.2e6,
    small_inputs=(InputSpec("input", (1, 3, 32, 32), "float32", low=-2.0, high=2.0),),
))
