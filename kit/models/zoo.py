"""The model registry: one entry per published workload, keyed by ByteMLPerf's name.

Input names, shapes (at batch 1) and dtypes are those of ByteMLPerf's model zoo
(data: bytemlperf_model_specs.csv); `low`/`high` keep generated values valid for each model.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

from kit.models import keras_models
from kit.models.spec import Framework, InputSpec, ModelEntry
from kit.models.weights import fit_state_dict, load_torch_state
from kit.registry import Registry

MODELS: Registry[ModelEntry] = Registry("model")


def _load_torch_state(model, weights_dir: Path | None):
    """Load model.safetensors / model.pt / pytorch_model.bin (torchvision key layout)."""
    if weights_dir is not None:
        fit_state_dict(model, *load_torch_state(weights_dir))
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


def build_conformer(small: bool = False, weights_dir: Path | None = None, seed: int = 0):
    from kit.models.conformer import conformer_encoder

    _seeded(seed)
    return _load_torch_state(conformer_encoder(small=small), weights_dir)


def build_qa(arch: str, small: bool = False, weights_dir: Path | None = None, seed: int = 0):
    from kit.models.hf import build_qa as build

    return build(arch, small=small, weights_dir=weights_dir, seed=seed)


def build_swin(small: bool = False, weights_dir: Path | None = None, seed: int = 0):
    from kit.models.hf import build_swin as build

    return build(small=small, weights_dir=weights_dir, seed=seed)


def build_clip_text(small: bool = False, weights_dir: Path | None = None, seed: int = 0):
    from kit.models.hf import build_clip_text as build

    return build(small=small, weights_dir=weights_dir, seed=seed)


def build_videobert(small: bool = False, weights_dir: Path | None = None, seed: int = 0):
    from kit.models.hf import build_dual_encoder

    return build_dual_encoder(small=small, weights_dir=weights_dir, seed=seed)


def build_roformer(small: bool = False, weights_dir: Path | None = None, seed: int = 0):
    return keras_models.build_roformer(small=small, weights_dir=weights_dir, seed=seed)


def build_widedeep(small: bool = False, weights_dir: Path | None = None, seed: int = 0):
    return keras_models.build_widedeep(small=small, weights_dir=weights_dir, seed=seed)


def image(name: str, size: int) -> InputSpec:
    return InputSpec(name, (1, 3, size, size), "float32", low=-2.0, high=2.0)


def squad_inputs(vocab: int, token_types: int) -> tuple[InputSpec, ...]:
    """ByteMLPerf's torch SQuAD inputs: int64 [1, 384] ids, an all-ones mask, token types."""
    return (
        InputSpec("input_ids.1", (1, 384), "int64", low=0, high=vocab),
        InputSpec("attention_mask.1", (1, 384), "int64", low=1, high=2),
        InputSpec("token_type_ids.1", (1, 384), "int64", low=0, high=token_types),
    )


MODELS.register(
    "resnet50-torch-fp32",
    ModelEntry(
        name="resnet50-torch-fp32",
        framework=Framework.TORCH,
        task="image-classification",
        inputs=(image("input_1.1", 224),),
        outputs=("softmax_tensor:0",),
        build=build_resnet50,
        description="ResNet-50 v1.5 (torchvision layout), softmax output",
        dataset="open_imagenet",
        metric="Top-1",
        hub_id="timm/resnet50.tv_in1k",
        reference_params=25.6e6,
        small_inputs=(image("input_1.1", 32),),
    ),
)

MODELS.register(
    "resnext101-c2",
    ModelEntry(
        name="resnext101-c2",
        framework=Framework.TORCH,
        task="image-classification",
        inputs=(image("input", 224),),
        outputs=("logits",),
        build=build_resnext101,
        description="ResNeXt-101 32x4d (the Qwant C2 study's model, 44M parameters)",
        dataset="coco_val_subset",
        metric="",
        hub_id="timm/resnext101_32x4d.fb_ssl_yfcc100m_ft_in1k",
        reference_params=44.2e6,
        small_inputs=(image("input", 32),),
    ),
)

MODELS.register(
    "swin-large-torch-fp32",
    ModelEntry(
        name="swin-large-torch-fp32",
        framework=Framework.TORCH,
        task="image-classification",
        inputs=(image("pixel_values.1", 384),),
        outputs=("logits",),
        build=build_swin,
        description="Swin-L patch4 window12 384 (transformers SwinForImageClassification)",
        dataset="open_imagenet",
        metric="Top-1",
        hub_id="microsoft/swin-large-patch4-window12-384",
        reference_params=197e6,
        small_inputs=(image("pixel_values.1", 64),),
    ),
)

QA = [
    ("bert", 30522, 2, "csarron/bert-base-uncased-squad-v1", 110e6),
    # albert-base-v2 backbone + QA head
    ("albert", 30000, 2, "twmkn9/albert-base-v2-squad2", 11.1e6),
    ("roberta", 50265, 1, "deepset/roberta-base-squad2", 125e6),
    ("deberta", 50265, 2, "stevemobs/deberta-base-finetuned-squad1", 139e6),
]
for arch, vocab, types, hub, ref in QA:
    MODELS.register(
        f"{arch}-torch-fp32",
        ModelEntry(
            name=f"{arch}-torch-fp32",
            framework=Framework.TORCH,
            task="question-answering",
            inputs=squad_inputs(vocab, types),
            outputs=("start_logits", "end_logits"),
            build=partial(build_qa, arch),
            description=f"{arch.upper()}-base extractive QA, sequence length 384 (transformers)",
            dataset="open_squad",
            metric="F1",
            hub_id=hub,
            reference_params=ref,
        ),
    )

MODELS.register(
    "roformer-tf-fp32",
    ModelEntry(
        name="roformer-tf-fp32",
        framework=Framework.TENSORFLOW,
        task="text-classification",
        inputs=(
            InputSpec("input_token:0", (1, 1024), "float32", low=1, high=50000, integer=True),
            InputSpec("input_segment:0", (1, 1024), "float32", low=0, high=2, integer=True),
        ),
        outputs=("Identity:0",),
        build=build_roformer,
        description="RoFormer-base classifier (Keras, rotary attention), length 1024; float32 "
        "inputs hold ids",
        dataset="open_cail2019",
        metric="Top-1",
        reference_params=124e6,
        small_inputs=(
            InputSpec("input_token:0", (1, 64), "float32", low=1, high=1000, integer=True),
            InputSpec("input_segment:0", (1, 64), "float32", low=0, high=2, integer=True),
        ),
    ),
)

CRITEO_NUMERIC = InputSpec("new_numeric_placeholder:0", (1, 13), "float32", low=0.0, high=1.0)
MODELS.register(
    "widedeep-tf-fp32",
    ModelEntry(
        name="widedeep-tf-fp32",
        framework=Framework.TENSORFLOW,
        task="ctr-prediction",
        inputs=(
            InputSpec("new_categorical_placeholder:0", (26, 2), "int64", low=0, high=10000),
            CRITEO_NUMERIC,
        ),
        outputs=("import/head/predictions/probabilities:0",),
        build=build_widedeep,
        description="Wide & Deep CTR model (Keras), Criteo layout: 26 hashed categorical + 13 "
        "numeric",
        dataset="open_criteo_kaggle",
        metric="Top-1",
        small_inputs=(
            InputSpec("new_categorical_placeholder:0", (26, 2), "int64", low=0, high=100),
            CRITEO_NUMERIC,
        ),
    ),
)

MODELS.register(
    "clip-onnx-fp32",
    ModelEntry(
        name="clip-onnx-fp32",
        framework=Framework.TORCH,
        task="text-encoding",
        inputs=(InputSpec("input_ids", (1, 77), "int32", low=0, high=49408),),
        outputs=("last_hidden_state", "pooler_output"),
        build=build_clip_text,
        description="CLIP ViT-L/14 text encoder (Stable Diffusion v1's), published as ONNX",
        dataset="fake_dataset",
        hub_id="openai/clip-vit-large-patch14",
        reference_params=123e6,
    ),
)

MODELS.register(
    "conformer-encoder-onnx-fp32",
    ModelEntry(
        name="conformer-encoder-onnx-fp32",
        framework=Framework.TORCH,
        task="speech-encoding",
        inputs=(
            InputSpec("src", (1, 3, 64, 512), "float32", low=-1.0, high=1.0),
            InputSpec("src_pad_mask", (1, 128), "bool", high=0.1),
        ),
        outputs=("memory",),
        build=build_conformer,
        description="Conformer encoder (12 blocks, d_model 256, 4x conv subsampling), published as "
        "ONNX",
        dataset="fake_dataset",
    ),
)

MODELS.register(
    "videobert-onnx-fp32",
    ModelEntry(
        name="videobert-onnx-fp32",
        framework=Framework.TORCH,
        task="zero-shot-classification",
        inputs=(
            image("image", 224),
            InputSpec("text", (100, 77), "int64", batched=False, low=0, high=49408),
        ),
        outputs=("output",),
        build=build_videobert,
        description="Image/text dual encoder (CLIP ViT-B/32 sizes) scoring 100 CIFAR-100 prompts",
        dataset="open_cifar",
        metric="Top-1",
        hub_id="openai/clip-vit-base-patch32",
        reference_params=151e6,
        small_inputs=(
            image("image", 32),
            InputSpec("text", (100, 77), "int64", batched=False, low=0, high=49408),
        ),
    ),
)
