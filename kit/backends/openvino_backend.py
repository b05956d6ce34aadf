"""OpenVINO on the CPU: the export read as is, shapes made static per batch size, compiled at an
inference precision (f32; bf16 where the CPU has avx512_bf16 or AMX; f16 where it has avx512_fp16
or AMX-FP16) with the LATENCY or THROUGHPUT performance hint; int8 by NNCF post-training
quantisation calibrated on the row's own seeded inputs, with NNCF's own defaults (what
`nncf.quantize(model, dataset)` does) or, with the option `nncf="transformer"`, its transformer
preset (SmoothQuant; attention kept in higher precision: slower, closer to fp32); on a CPU without
VNNI or AMX, whose int8 sums saturate, with NNCF's overflow fix on every layer (7-bit weights).

OpenVINO picks bf16 by itself on a CPU that has it and falls back to f32 silently where a 16-bit
hint is not native: the kit always states the hint, reads back the precision the compiled model
really runs at, and refuses a session whose precision is not the one asked for. Compiled models are
cached by OpenVINO under outputs/cache/openvino/ov-<version>/ (its blob key hashes the model's
content, the properties and the device; kept under CACHE_GB, the oldest blobs deleted first); the
NNCF int8 IR is cached beside the export, keyed by
the export's content, the calibration and the NNCF/OpenVINO versions (calibrated once at batch 1 and
reshaped to each batch size).

>>> ov_precision("bf16")
'bf16'
"""

from __future__ import annotations

import importlib.metadata
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np

from kit.backends.base import HOST_TO_HOST, BackendConfig, InProcessBackend, InProcessSession
from kit.backends.options import OpenVinoOptions
from kit.cache import cached_file, prune_oldest
from kit.errors import BackendUnavailable, InvalidParameter
from kit.hardware.environment import cpu_flags, int8_saturates, usable_cores
from kit.models.onnx_file import onnx_sources
from kit.models.spec import ExportedModel
from kit.paths import cache_dir

OV_PRECISION = {"fp32": "f32", "bf16": "bf16", "fp16": "f16", "int8": "f32"}
#: the CPU flags that make each 16-bit inference precision native to OpenVINO's CPU plugin
NATIVE_FLAGS = {"bf16": ("avx512_bf16", "amx_bf16"), "fp16": ("avx512_fp16", "amx_fp16")}
#: OpenVINO's compiled-model cache is kept under this size (the least recently written blobs go
#: first): a quick `make reproduce` wrote 12 GB of blobs (Swin-L's at bf16 about 1-2 GB each) that
#: only a later run at the same shapes reads. KIT_OPENVINO_CACHE_GB changes it; 0 turns the cache
#: off.
CACHE_GB = 4.0
# seeded samples NNCF calibrates int8 on (at least 2 batches): minutes on 2 cores beyond
CALIBRATION_SAMPLES = 8
FP8 = "OpenVINO's CPU plugin has no fp8 kernels; the FP8 rows run int8 (NNCF) on a CPU"
#: NNCF's overflow fix on every layer where the CPU's int8 sums saturate (no VNNI or AMX:
#: kit.hardware.environment.int8_saturates): its default fixes the first convolution only, and a
#: MatMul's int8 output was 29 % off on an AVX2-only EPYC (Zen 3), 1.3 % with the fix
OVERFLOW_FIX = "7-bit weights (NNCF's overflow fix on every layer: no VNNI here), 8-bit activations"


def ov_precision(precision: str) -> str:
    if precision not in OV_PRECISION:
        raise InvalidParameter(
            "precision", precision, f"openvino supports {', '.join(OV_PRECISION)} ({FP8})"
        )
    return OV_PRECISION[precision]


def hint(config: BackendConfig) -> str:
    """The option hint (default LATENCY), checked where the options are read."""
    return config.options_as(OpenVinoOptions).hint_mode


def nncf_preset(config: BackendConfig) -> str:
    """The option nncf (default: NNCF's own settings), checked where the options are read."""
    return config.options_as(OpenVinoOptions).nncf_preset


def not_native(precision: str, flags: frozenset[str]) -> str | None:
    """Why OpenVINO would not run `precision` natively on a CPU with `flags` (None: it would)."""
    need = NATIVE_FLAGS.get(precision)
    if need and not flags & set(need):
        return (
            f"OpenVINO {precision} needs {' or '.join(need)} on the CPU; this CPU has neither "
            f"(OpenVINO would run f32 and call it {precision})"
        )
    return None


def versions() -> dict:
    out = {}
    for name in ("openvino", "nncf"):
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return out


class OvSession(InProcessSession):
    def __init__(self, compiled, description: dict):
        self.compiled = compiled
        self.description = description
        self.request = compiled.create_infer_request()

    def run(self, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        result = self.request.infer({k: np.ascontiguousarray(v) for k, v in inputs.items()})
        return [np.array(result[out]) for out in self.compiled.outputs]

    def bind(self, inputs: dict[str, np.ndarray]) -> Callable[[], object]:
        """A host-to-host call with its own infer request, inputs staged once (as ORT's IO
        binding)."""
        request = self.compiled.create_infer_request()
        staged = {k: np.ascontiguousarray(v) for k, v in inputs.items()}
        for name, value in staged.items():
            request.set_tensor(name, _tensor(value))
        infer = request.infer
        return lambda: infer()

    def close(self) -> None:
        self.request = None
        self.compiled = None


def _tensor(value: np.ndarray):
    import openvino as ov

    return ov.Tensor(value)


class OpenVinoBackend(InProcessBackend):
    name = "openvino"
    options_type = OpenVinoOptions
    precisions = ("fp32", "bf16", "fp16", "int8")
    module = "openvino"
    label = "OpenVINO"

    def check_precision(self, precision: str) -> None:
        ov_precision(precision)

    def load(self, model: ExportedModel, config: BackendConfig, batch_size: int) -> OvSession:
        self.check_precision(config.precision)
        if config.device != "cpu":
            raise BackendUnavailable(
                f"the kit runs OpenVINO on the CPU only (asked: {config.device})"
            )
        reason = not_native(config.precision, frozenset(cpu_flags()))
        if reason:
            raise BackendUnavailable(reason)
        perf_hint = hint(config)
        preset = nncf_preset(config) if config.precision == "int8" else ""
        import openvino as ov

        core = ov.Core()
        cap_gb = blob_cache_gb()
        blob_dir = cache_dir() / "openvino" / f"ov-{ov.__version__.split('-')[0]}"
        if cap_gb > 0:
            blob_dir.mkdir(parents=True, exist_ok=True)
            core.set_property({"CACHE_DIR": str(blob_dir)})
        shapes = {k: list(v.shape) for k, v in model.make_inputs(batch_size).items()}
        source, int8 = Path(model.onnx_path), None
        if config.precision == "int8":
            source, int8 = quantized_ir(core, model, preset)
            ov_model = core.read_model(str(source), str(source.with_suffix(".bin")))
        else:
            ov_model = core.read_model(str(source))
        ov_model.reshape(shapes)
        properties = {
            "INFERENCE_PRECISION_HINT": ov_precision(config.precision),
            "PERFORMANCE_HINT": perf_hint,
            "INFERENCE_NUM_THREADS": int(config.threads or usable_cores()),
        }
        try:
            compiled = core.compile_model(ov_model, "CPU", properties)
        except RuntimeError as exc:
            raise BackendUnavailable(
                f"OpenVINO could not compile {source.name} at batch {batch_size}: "
                f"{str(exc).strip().splitlines()[0][:200]}"
            ) from exc
        if cap_gb > 0:
            prune_oldest(blob_dir, "*.blob", int(cap_gb * 1e9))
        description = describe(
            compiled,
            config,
            perf_hint=perf_hint,
            source=source,
            shapes=shapes,
            blob_dir=blob_dir if cap_gb > 0 else None,
            int8=int8,
        )
        check_ran_as_asked(description, config.precision)
        return OvSession(compiled, description)


def blob_cache_gb() -> float:
    """The compiled-model cache's size limit in GB (KIT_OPENVINO_CACHE_GB, else CACHE_GB; 0: no
    cache)."""
    raw = os.environ.get("KIT_OPENVINO_CACHE_GB", "")
    if not raw:
        return CACHE_GB
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise InvalidParameter(
            "KIT_OPENVINO_CACHE_GB", raw, "a size in GB, >= 0 (0: no compiled-model cache)"
        )
    return value


def describe(
    compiled,
    config: BackendConfig,
    *,
    perf_hint: str,
    source: Path,
    shapes: dict,
    blob_dir: Path | None,
    int8: dict | None,
) -> dict:
    """What ran: versions, the hints asked for and the precision and streams the compiled model
    has."""
    read = {}
    for prop in (
        "INFERENCE_PRECISION_HINT",
        "NUM_STREAMS",
        "INFERENCE_NUM_THREADS",
        "OPTIMAL_NUMBER_OF_INFER_REQUESTS",
    ):
        try:
            value = compiled.get_property(prop)
            read[prop] = value.to_string() if hasattr(value, "to_string") else str(value)
        except RuntimeError:
            read[prop] = "unreadable"
    out = {
        "backend": "openvino",
        "device": "cpu",
        "precision": config.precision,
        **{f"{k}_version": v for k, v in versions().items() if k == "openvino" or int8},
        "performance_hint": perf_hint,
        "inference_precision_hint": ov_precision(config.precision),
        "inference_precision": read["INFERENCE_PRECISION_HINT"],
        "num_streams": read["NUM_STREAMS"],
        "threads": read["INFERENCE_NUM_THREADS"],
        "optimal_infer_requests": read["OPTIMAL_NUMBER_OF_INFER_REQUESTS"],
        "static_shapes": shapes,
        "model_file": source.name,
        "compiled_cache": str(blob_dir) if blob_dir else "off (KIT_OPENVINO_CACHE_GB=0)",
        "timing": HOST_TO_HOST,
    }
    if int8:
        out["conversion"] = int8
    return out


def check_ran_as_asked(description: dict, precision: str) -> None:
    """OpenVINO lowers a 16-bit hint to f32 silently where the CPU lacks it: refuse that session."""
    ran = description["inference_precision"].lower()
    want = ov_precision(precision)
    aliases = {"f32": ("f32", "float32"), "bf16": ("bf16", "bfloat16"), "f16": ("f16", "float16")}[
        want
    ]
    if not any(a in ran for a in aliases):
        raise BackendUnavailable(
            f"OpenVINO compiled at {ran} where {want} was asked for ({precision} is not "
            f"native here)"
        )


def quantized_ir(core, model: ExportedModel, preset: str = "default") -> tuple[Path, dict]:
    """The NNCF int8 IR of the export with `preset` (kit.backends.options.NNCF_PRESETS; cached by
    content; calibrated at batch 1, or the model's fixed batch, and reshaped to each run's batch at
    load): (xml path, conversion record)."""
    try:
        import nncf
    except ImportError as exc:
        raise BackendUnavailable(
            f"OpenVINO int8 needs nncf, which is not installed ({exc})"
        ) from exc
    calib_batch = model.fixed_batch_size or 1
    batches = max(2, -(-CALIBRATION_SAMPLES // calib_batch))
    seven_bit = int8_saturates()
    bits = OVERFLOW_FIX if seven_bit else "8-bit weights and activations"
    record = {
        "method": f"nncf post-training quantisation ({bits}, MinMax and fast bias correction"
        + (", SmoothQuant" if preset == "transformer" else "")
        + ")",
        "model_type": preset,
        "calibration": f"{batches} seeded batches of {calib_batch} (model.make_inputs, "
        f"seeds 0..{batches - 1})",
        **versions(),
    }
    shapes = {k: list(v.shape) for k, v in model.make_inputs(calib_batch).items()}
    stem = Path(model.onnx_path).stem

    def build(tmp: Path) -> dict:
        import openvino as ov

        ov_model = core.read_model(str(model.onnx_path))
        ov_model.reshape(shapes)
        data = [model.make_inputs(calib_batch, seed=s) for s in range(batches)]
        extra: dict = {"model_type": nncf.ModelType.TRANSFORMER} if preset == "transformer" else {}
        if seven_bit:
            from nncf.quantization.advanced_parameters import (
                AdvancedQuantizationParameters,
                OverflowFix,
            )

            extra["advanced_parameters"] = AdvancedQuantizationParameters(
                overflow_fix=OverflowFix.ENABLE
            )
        quantized = nncf.quantize(ov_model, nncf.Dataset(data), subset_size=batches, **extra)
        ov.save_model(quantized, str(tmp), compress_to_fp16=False)
        # where read_model looks for the xml's weights
        final_bin = directory / f"{artifact_stem(tmp)}.bin"
        os.replace(tmp.with_suffix(".bin"), final_bin)
        return {"weights_file": final_bin.name, "weights_bytes": final_bin.stat().st_size}

    directory = Path(model.onnx_path).parent
    try:
        xml = cached_file(
            directory,
            f"{stem}-ov-int8",
            ".xml",
            sources=list(onnx_sources(model.onnx_path)),
            settings={**record, "shapes": shapes},
            build=build,
        )
    except (RuntimeError, ValueError) as exc:  # NNCF and OpenVINO raise their own errors as these
        raise BackendUnavailable(
            f"NNCF int8 quantisation of {stem} failed: {str(exc).strip().splitlines()[0][:200]}"
        ) from exc
    weights = xml.with_suffix(".bin")
    if not weights.exists():
        xml.unlink(missing_ok=True)
        raise BackendUnavailable(
            f"the cached int8 IR {xml.name} has lost its weights file; it is rebuilt next time"
        )
    return xml, {**record, "file": xml.name}


def artifact_stem(tmp: Path) -> str:
    """The final artifact's stem from kit.cache's temporary name ('.<stem>.<pid>.tmp.xml')."""
    return tmp.name[1:].removesuffix(f".{os.getpid()}.tmp{tmp.suffix}")
