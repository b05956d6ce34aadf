"""Reduced-precision ONNX files for ONNX Runtime: fp16 (onnxconverter-common) and int8 (ORT).

int8 uses static QDQ quantization (calibrated on the model's seeded inputs) for convolutional
models (more Conv than MatMul/Gemm nodes in the graph), where VNNI integer convolutions pay off,
and dynamic quantization (weights int8, activation scales computed per call) for MatMul/transformer
models, whose activation ranges vary per input; dynamic needs no calibration session, so it also
converts in a fraction of the time and memory. `quantization_method` says which (the ORT option
`quantization` overrides it), and the ORT session records it in its description.

Converted files are cached next to the fp32 export (outputs/cache/models), keyed by the source
file's content, the converter's version and settings (kit.cache), so each conversion happens
once and a model replaced at the same path is converted again. Before converting, the memory the
step needs (kit.measure.memory) is compared with the memory available.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import re
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from unittest import mock

from kit import progress
from kit.cache import cached_file
from kit.errors import CorruptModel, InvalidParameter, KitError, MissingResource
from kit.hardware.environment import int8_saturates, onnxruntime_version
from kit.measure.memory import check_memory, release_freed_memory
from kit.models.onnx_file import onnx_sources
from kit.models.spec import ExportedModel, make_inputs
from kit.paths import cache_dir
from kit.registry import Registry

ORT_PRECISIONS = ("fp16", "int8")
CNN_TASKS = ("image-classification", "object-detection", "image-segmentation", "vision")
CALIBRATION_BATCHES = 4  # seeded random batches of 1: enough for min/max on random weights
CONVERSION_VERSION = 3  # bump when a converter's settings change


def is_convolutional(task: str) -> bool:
    """Whether a zoo task is served by a CNN (channels_last in torch), from its task name."""
    return task in CNN_TASKS or task.startswith("image")


QUANTIZATION_METHODS = ("static-qdq", "dynamic")


def quantization_method(model: ExportedModel, asked: str | None = None) -> str:
    """`asked` when given, else 'static-qdq' where Conv nodes outnumber MatMul/Gemm nodes in the
    graph (a CNN) and 'dynamic' otherwise (transformers, Swin included, whatever their task)."""
    if asked is not None:
        if asked not in QUANTIZATION_METHODS:
            raise InvalidParameter(
                "quantization", asked, f"one of {', '.join(QUANTIZATION_METHODS)}"
            )
        return asked
    counts = op_counts(Path(model.onnx_path))
    if counts is None:  # no readable graph yet: the task name decides
        return "static-qdq" if is_convolutional(model.task) else "dynamic"
    conv, matmul = counts.get("Conv", 0), counts.get("MatMul", 0) + counts.get("Gemm", 0)
    return "static-qdq" if conv > matmul else "dynamic"


def op_counts(path: Path) -> dict[str, int] | None:
    """How many nodes of each op type the graph has (cached per file, size and modification
    time)."""
    try:
        st = path.stat()
    except OSError:
        return None
    return _op_counts(str(path), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=32)
def _op_counts(path: str, size: int, mtime_ns: int) -> dict[str, int] | None:
    import onnx

    try:
        graph = onnx.load(path, load_external_data=False).graph
    except Exception:  # noqa: BLE001 - a corrupt file is reported by the step that loads it
        return None
    return dict(collections.Counter(node.op_type for node in graph.node))


def conversion_label(
    model: ExportedModel, precision: str, symmetric: bool = False, quantization: str | None = None
) -> str:
    """What the conversion does, in words, for the session description."""
    if precision == "int8" and symmetric:
        return (
            "onnxruntime static QDQ int8, signed symmetric activations and weights (S8S8, as "
            f"TensorRT takes them; per-channel weights, MinMax calibration on {CALIBRATION_BATCHES}"
            " seeded inputs)"
        )
    if precision == "fp16":
        return (
            "onnxconverter-common float16 (keep_io_types=True; nodes ONNX Runtime rejects in "
            "fp16 are kept in fp32)"
        )
    seven_bit = (
        "; 7-bit weights (reduce_range): this CPU's int8 kernels saturate without VNNI"
        if int8_saturates()
        else ""
    )
    if quantization_method(model, quantization) == "static-qdq":
        return (
            f"onnxruntime static QDQ int8 (U8S8, per-channel weights, MinMax calibration on "
            f"{CALIBRATION_BATCHES} seeded inputs{seven_bit})"
        )
    return f"onnxruntime dynamic int8 (QInt8 weights, uint8 activations scaled per call{seven_bit})"


def convert_for_ort(
    model: ExportedModel,
    precision: str,
    directory: Path | None = None,
    symmetric: bool = False,
    quantization: str | None = None,
) -> Path:
    """The ONNX file for `precision` ('fp16' or 'int8'), converted once and cached.

    `symmetric=True` (int8 for TensorRT): static QDQ with signed symmetric activations, any model.
    `quantization` ('static-qdq' or 'dynamic') overrides the int8 method the graph suggests.
    """
    if precision not in ORT_PRECISIONS:
        raise InvalidParameter(
            "precision", precision, f"convert_for_ort makes {', '.join(ORT_PRECISIONS)}"
        )
    source = Path(model.onnx_path)
    if not source.is_file():
        raise MissingResource(f"cannot convert {source}: no such file")
    method = (
        "fp16"
        if precision == "fp16"
        else "static-qdq-s8s8"
        if symmetric
        else quantization_method(model, quantization)
    )

    def build(out: Path) -> dict:
        check_memory(
            MEMORY_STEPS[method],
            source.stat().st_size,
            f"converting {source.name} to {precision} ({method})",
        )
        try:
            with progress.step(
                f"converting {model.name} to {precision} ({method}), cached after this"
            ):
                blocked = CONVERTERS.get(method)(model, out)
        except KitError:
            raise
        except Exception as exc:  # noqa: BLE001
            # converters raise many types; report which file failed
            raise CorruptModel(
                f"cannot convert {source.name} to {precision} ({method}): {exc}"
            ) from exc
        return {"method": method, "source": str(source), "kept_fp32": blocked or []}

    return cached_file(
        conversion_dir(source, directory),
        f"{source.stem}-{method}",
        ".onnx",
        sources=list(onnx_sources(source)),
        settings=conversion_settings(model, method),
        build=build,
    )


MEMORY_STEPS = {
    "fp16": "fp16",
    "dynamic": "int8-dynamic",
    "static-qdq": "int8-static",
    "static-qdq-s8s8": "int8-static",
}


def conversion_settings(model: ExportedModel, method: str) -> dict:
    """Everything besides the source's content that the converted file depends on."""
    settings = {
        "method": method,
        "onnxruntime": onnxruntime_version(),
        "version": CONVERSION_VERSION,
    }
    if method == "fp16":
        from onnxconverter_common import __version__ as converter_version

        settings["onnxconverter-common"] = converter_version
    if method in SEVEN_BIT_METHODS:
        settings["reduce_range"] = int8_saturates()
    if method.startswith("static-qdq"):
        settings["calibration"] = {
            "batches": CALIBRATION_BATCHES,
            "inputs": [i.to_dict() for i in model.inputs],
        }
    return settings


def conversion_dir(source: Path, directory: Path | None = None) -> Path:
    """Next to the source when it lives in the kit's cache, else under cache/converted."""
    if directory is not None:
        return directory
    cache = cache_dir().resolve()
    return source.parent if cache in source.resolve().parents else cache / "converted"


FP16_REPAIR_ATTEMPTS = 8


def to_fp16(model: ExportedModel, out: Path) -> list[str]:
    """fp16 with fp32 inputs/outputs; returns the nodes kept in fp32.

    onnxconverter-common rewrites Cast(to=float) nodes (on integer id paths in tf2onnx graphs, on
    masks and position buckets in DeBERTa, CLIP, Swin) into fp16 while their consumers still expect
    fp32, which ONNX Runtime rejects at load. When the load error names such a Cast, every
    Cast(to=float) is kept in fp32 (the converter casts their outputs for fp16 consumers); any other
    node named is kept in fp32 alone; then the conversion is redone.
    """
    import onnx
    import onnxruntime as ort
    from onnxconverter_common import float16

    blocked: list[str] = []
    for _ in range(FP16_REPAIR_ATTEMPTS):
        source = onnx.load(str(model.onnx_path))
        float_casts = [
            n.name
            for n in source.graph.node
            if n.op_type == "Cast"
            and n.name
            and any(a.name == "to" and a.i == onnx.TensorProto.FLOAT for a in n.attribute)
        ]
        with warnings.catch_warnings():
            # one line per tiny weight clamped to fp16's range: hundreds
            warnings.filterwarnings("ignore", message="the float32 number", category=UserWarning)
            converted = float16.convert_float_to_float16(
                source, keep_io_types=True, node_block_list=blocked
            )
        onnx.save(converted, str(out))
        del converted, source  # the check below loads the file; one copy of the model at a time
        try:
            ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
            return blocked
        except Exception as exc:  # noqa: BLE001 - ORT's load error names the node to keep in fp32
            node = re.search(r"(?:of|in) node \(([^)]+)\)", str(exc))
            if node is None or node.group(1) in blocked:
                raise
            named = node.group(1)
            blocked += (
                [c for c in float_casts if c not in blocked] if named in float_casts else [named]
            )
    raise CorruptModel(
        f"fp16 conversion of {model.name} still fails after keeping {len(blocked)} nodes "
        f"in fp32 (first: {', '.join(blocked[:5])})"
    )


#: the int8 methods ONNX Runtime's CPU kernels run u8 x s8: 7-bit weights where those saturate
#: (kit.hardware.environment.int8_saturates); the symmetric s8s8 one is TensorRT's
SEVEN_BIT_METHODS = ("dynamic", "static-qdq")


def to_int8_dynamic(model: ExportedModel, out: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(
        str(model.onnx_path),
        str(out),
        weight_type=QuantType.QInt8,
        reduce_range=int8_saturates(),
    )


def to_int8_static(model: ExportedModel, out: Path, symmetric: bool = False) -> None:
    """Static QDQ int8; calibration ranges are merged one input at a time (CalibStridedMinMax=1),
    so only one input's intermediate tensors are held, not every calibration input's."""
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    prepared = out.with_suffix(".pre.onnx")
    signed = (
        {
            "activation_type": QuantType.QInt8,
            "extra_options": {
                "ActivationSymmetric": True,
                "WeightSymmetric": True,
                "CalibStridedMinMax": 1,
            },
        }
        if symmetric
        else {"activation_type": QuantType.QUInt8, "extra_options": {"CalibStridedMinMax": 1}}
    )
    try:
        quant_pre_process(str(model.onnx_path), str(prepared), skip_symbolic_shape=True)
        release_freed_memory()  # pre-processing's sessions and copies are gone; return their pages
        with calibration_without_arena():
            quantize_static(
                str(prepared),
                str(out),
                SeededReader(model),
                quant_format=QuantFormat.QDQ,
                weight_type=QuantType.QInt8,
                per_channel=True,
                reduce_range=not symmetric and int8_saturates(),
                calibrate_method=CalibrationMethod.MinMax,
                **signed,
            )
    finally:
        prepared.unlink(missing_ok=True)


@contextlib.contextmanager
def calibration_without_arena() -> Iterator[None]:
    """Run ONNX Runtime's calibration session without its CPU memory arena.

    The calibrator's session (every activation of the augmented model) grows ORT's arena by
    doubling: Swin-L's calibration reached 11 GB with it. quantize_static takes no session
    options, so the calibrator's session factory is replaced for the duration of the call.
    """
    import onnxruntime as ort
    from onnxruntime.quantization.calibrate import CalibraterBase

    def create_inference_session(self) -> None:
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        options.enable_cpu_mem_arena = False
        options.enable_mem_pattern = False
        self.infer_session = ort.InferenceSession(
            self.augmented_model_path, sess_options=options, providers=self.execution_providers
        )

    with mock.patch.object(CalibraterBase, "create_inference_session", create_inference_session):
        yield


class SeededReader:
    """CalibrationDataReader over the model's own seeded input generator (batch 1 each).

    Inputs are made when asked for; `set_range` lets ONNX Runtime calibrate a slice at a time.
    """

    def __init__(self, model: ExportedModel, batches: int = CALIBRATION_BATCHES):
        self._inputs, self._batches = model.inputs, batches
        self.set_range(0, batches)

    def __len__(self) -> int:
        return self._batches

    def set_range(self, start_index: int, end_index: int) -> None:
        self._next, self._end = start_index, min(end_index, self._batches)

    def get_next(self) -> dict | None:
        if self._next >= self._end:
            return None
        self._next += 1
        return make_inputs(self._inputs, 1, seed=100 + self._next - 1)

    def rewind(self) -> None:  # the calibrator may call it; one pass is all we give
        pass


CONVERTERS: Registry[Callable[[ExportedModel, Path], list[str] | None]] = Registry("ORT conversion")
CONVERTERS.register("fp16", to_fp16)
CONVERTERS.register("dynamic", to_int8_dynamic)
CONVERTERS.register("static-qdq", to_int8_static)
CONVERTERS.register(
    "static-qdq-s8s8", lambda model, out: to_int8_static(model, out, symmetric=True)
)
