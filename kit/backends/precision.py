"""Reduced-precision ONNX files for ONNX Runtime: fp16 (onnxconverter-common) and int8 (ORT).

int8 uses static QDQ quantization (calibrated on the model's seeded inputs) for convolutional
models, where activations dominate and VNNI integer convolutions pay off, and dynamic
quantization (weights int8, activation scales computed per call) for MatMul/transformer
models, whose activation ranges vary per input. `quantization_method` says which, and the
ORT session records it in its description.

Converted files are cached next to the fp32 export (outputs/cache/models), keyed by the
source file's name and the converter's version, so each conversion happens once.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from pathlib import Path

from kit import progress
from kit.environment import onnxruntime_version
from kit.errors import CorruptModel, InvalidParameter
from kit.models.spec import ExportedModel, make_inputs
from kit.paths import cache_dir
from kit.registry import Registry

ORT_PRECISIONS = ("fp16", "int8")
CNN_TASKS = ("image-classification", "object-detection", "image-segmentation", "vision")
CALIBRATION_BATCHES = 4  # seeded random batches of 1: enough for min/max on random weights
CONVERSION_VERSION = 2  # bump when a converter's settings change


def is_convolutional(task: str) -> bool:
    """Whether a zoo task is served by a CNN (channels_last, static int8), from its task name."""
    return task in CNN_TASKS or task.startswith("image")


def quantization_method(model: ExportedModel) -> str:
    """'static-qdq' for convolutional models, 'dynamic' for MatMul/transformer ones."""
    return "static-qdq" if is_convolutional(model.task) else "dynamic"


def conversion_label(model: ExportedModel, precision: str, symmetric: bool = False) -> str:
    """What the conversion does, in words, for the session description."""
    if precision == "int8" and symmetric:
        return (f"onnxruntime static QDQ int8, signed symmetric activations and weights (S8S8, as TensorRT "
                f"takes them; per-channel weights, MinMax calibration on {CALIBRATION_BATCHES} seeded inputs)")
    if precision == "fp16":
        return ("onnxconverter-common float16 (keep_io_types=True; nodes ONNX Runtime rejects in "
                "fp16 are kept in fp32)")
    if quantization_method(model) == "static-qdq":
        return (f"onnxruntime static QDQ int8 (U8S8, per-channel weights, MinMax calibration on "
                f"{CALIBRATION_BATCHES} seeded inputs)")
    return "onnxruntime dynamic int8 (QInt8 weights, uint8 activations scaled per call)"


def convert_for_ort(model: ExportedModel, precision: str, directory: Path | None = None,
                    symmetric: bool = False) -> Path:
    """The ONNX file for `precision` ('fp16' or 'int8'), converted once and cached.

    `symmetric=True` (int8 for TensorRT): static QDQ with signed symmetric activations, any model.
    """
    if precision not in ORT_PRECISIONS:
        raise InvalidParameter("precision", precision, f"convert_for_ort makes {', '.join(ORT_PRECISIONS)}")
    method = "fp16" if precision == "fp16" else "static-qdq-s8s8" if symmetric else quantization_method(model)
    target = converted_path(model.onnx_path, method, directory)
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".tmp.onnx")
    try:
        with progress.step(f"converting {model.name} to {precision} ({method}), cached after this"):
            CONVERTERS.get(method)(model, tmp)
    except Exception as exc:  # noqa: BLE001 - converters raise many types; report which file failed
        tmp.unlink(missing_ok=True)
        raise CorruptModel(f"cannot convert {model.onnx_path.name} to {precision} ({method}): {exc}") from exc
    tmp.replace(target)
    return target


def converted_path(source: Path, method: str, directory: Path | None = None) -> Path:
    """Next to the source when it lives in the kit's cache, else under cache/converted."""
    ort = onnxruntime_version()  # the onnxruntime or the onnxruntime-gpu distribution
    key = hashlib.sha1(f"{source.resolve()}|{method}|ort-{ort}|v{CONVERSION_VERSION}".encode()).hexdigest()[:8]
    if directory is None:
        cache = cache_dir().resolve()
        directory = source.parent if cache in source.resolve().parents else cache / "converted"
    return directory / f"{source.stem}-{method}-{key}.onnx"


FP16_REPAIR_ATTEMPTS = 8


def to_fp16(model: ExportedModel, out: Path) -> list[str]:
    """fp16 with fp32 inputs/outputs; returns the nodes kept in fp32.

    onnxconverter-common rewrites Cast(to=float) nodes on integer id paths (tf2onnx graphs) into
    fp16 while their consumers still expect fp32, which ONNX Runtime rejects at load. Each such
    node named in the load error is kept in fp32 and the conversion redone.
    """
    import onnx
    import onnxruntime as ort
    from onnxconverter_common import float16

    blocked: list[str] = []
    for _ in range(FP16_REPAIR_ATTEMPTS):
        converted = float16.convert_float_to_float16(onnx.load(str(model.onnx_path)), keep_io_types=True,
                                                     node_block_list=blocked)
        onnx.save(converted, str(out))
        try:
            ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
            return blocked
        except Exception as exc:  # noqa: BLE001 - ORT's load error names the node to keep in fp32
            node = re.search(r"of node \(([^)]+)\)", str(exc))
            if node is None or node.group(1) in blocked:
                raise
            blocked.append(node.group(1))
    raise CorruptModel(f"fp16 conversion of {model.name} still fails after keeping {blocked} in fp32")


def to_int8_dynamic(model: ExportedModel, out: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(str(model.onnx_path), str(out), weight_type=QuantType.QInt8)


def to_int8_static(model: ExportedModel, out: Path, symmetric: bool = False) -> None:
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    prepared = out.with_suffix(".pre.onnx")
    signed = {"activation_type": QuantType.QInt8,
              "extra_options": {"ActivationSymmetric": True, "WeightSymmetric": True}} if symmetric else {
              "activation_type": QuantType.QUInt8}
    try:
        quant_pre_process(str(model.onnx_path), str(prepared), skip_symbolic_shape=True)
        quantize_static(str(prepared), str(out), SeededReader(model), quant_format=QuantFormat.QDQ,
                        weight_type=QuantType.QInt8, per_channel=True,
                        calibrate_method=CalibrationMethod.MinMax, **signed)
    finally:
        prepared.unlink(missing_ok=True)


class SeededReader:
    """CalibrationDataReader over the model's own seeded input generator (batch 1 each)."""

    def __init__(self, model: ExportedModel, batches: int = CALIBRATION_BATCHES):
        self._feeds = iter([make_inputs(model.inputs, 1, seed=100 + i) for i in range(batches)])

    def get_next(self) -> dict | None:
        return next(self._feeds, None)

    def rewind(self) -> None:  # the calibrator may call it; one pass is all we give
        pass


CONVERTERS: Registry[Callable[[ExportedModel, Path], None]] = Registry("ORT conversion")
CONVERTERS.register("fp16", to_fp16)
CONVERTERS.register("dynamic", to_int8_dynamic)
CONVERTERS.register("static-qdq", to_int8_static)
CONVERTERS.register("static-qdq-s8s8", lambda model, out: to_int8_static(model, out, symmetric=True))
