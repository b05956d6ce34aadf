"""Double of `poprt.compiler`: CompilerOptions attributes are type-checked, and
`compile_and_export` writes a small "PopEF" container that only `runtime.Runner` accepts."""

from __future__ import annotations

import hashlib
import json

import onnx

POPEF_MAGIC = b"KIT-POPRT-DOUBLE-POPEF 1\n"

# attribute -> (type, default, check or None). Names as used in PopRT docs and ByteMLPerf.
_OPTIONS = {
    "num_ipus": (int, 1, lambda v: v >= 1),
    "ipu_version": (str, "", lambda v: v in ("", "ipu2", "ipu21")),
    "batches_per_step": (int, 1, lambda v: v >= 1),
    "partials_type": (str, "half", lambda v: v in ("half", "float")),
    "available_memory_proportion": (float, 0.6, lambda v: 0.0 <= v <= 1.0),  # the docs: in [0, 1]
    "num_io_tiles": (int, 0, lambda v: v >= 0),
    "enable_prefetch_datastreams": (bool, True, None),  # PopRT: "Prefetching is enabled by default"
    "stream_buffering_depth": (int, 1, lambda v: v >= 1),
    "rearrange_anchors_on_host": (bool, True, None),
    "rearrange_streams_on_host": (bool, False, None),
    "group_host_sync": (bool, False, None),
    "enable_engine_caching": (bool, False, None),
    "cache_path": (str, "", None),
    "use_128bit_conv_unit_load": (bool, False, None),
    "enable_fast_reduce": (bool, False, None),
    "enable_outlining": (bool, True, None),
    "outline_threshold": (float, 1.0, None),
    "enable_non_stable_softmax": (bool, False, None),
    "constant_weights": (bool, True, None),
    "virtual_graph_mode": (str, "off", None),
    "enable_pipelining": (bool, False, None),
}


class CompilerOptions:
    """Like the pybind11 class: unknown attributes and wrong types raise."""

    def __init__(self):
        for name, (_, default, _) in _OPTIONS.items():
            object.__setattr__(self, name, default)

    def __setattr__(self, name, value):
        if name not in _OPTIONS:
            raise AttributeError(
                f"'poprt._compiler.CompilerOptions' object has no attribute '{name}'"
            )
        kind, _, check = _OPTIONS[name]
        ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            ok, value = True, float(value)
        if not ok:
            raise TypeError(
                f"CompilerOptions.{name}: incompatible type {type(value).__name__}, "
                f"expected {kind.__name__}"
            )
        if check is not None and not check(value):
            raise ValueError(f"CompilerOptions.{name}: invalid value {value!r}")
        object.__setattr__(self, name, value)

    @classmethod
    def from_dict(cls, options):
        opts = cls()
        for name, value in options.items():
            setattr(opts, name, value)
        return opts

    def to_dict(self):
        return {name: getattr(self, name) for name in _OPTIONS}


class Executable:
    """A compiled model: the converted ONNX bytes plus what was asked of the compiler."""

    def __init__(self, model_bytes, outputs, options):
        self.model_bytes = model_bytes
        self.outputs = list(outputs)
        self.options = options

    def to_bytes(self):
        meta = json.dumps(
            {
                "outputs": self.outputs,
                "options": self.options,
                "sha1": hashlib.sha1(self.model_bytes).hexdigest(),
            }
        ).encode()
        return POPEF_MAGIC + len(meta).to_bytes(8, "little") + meta + self.model_bytes

    @classmethod
    def from_bytes(cls, data, source="<bytes>"):
        if not data.startswith(POPEF_MAGIC):
            raise RuntimeError(f"{source} is not a PopEF file")
        start = len(POPEF_MAGIC)
        size = int.from_bytes(data[start : start + 8], "little")
        meta = json.loads(data[start + 8 : start + 8 + size])
        model_bytes = data[start + 8 + size :]
        if hashlib.sha1(model_bytes).hexdigest() != meta["sha1"]:
            raise RuntimeError(f"{source} is corrupt (checksum mismatch)")
        return cls(model_bytes, meta["outputs"], meta["options"])


class Compiler:
    """Static methods only, as in PopRT."""

    @staticmethod
    def compile(model, outputs, options=None):
        return _compile(model, outputs, options)

    @staticmethod
    def compile_and_export(model, outputs, filename, options=None):
        if not isinstance(filename, str) or not filename:
            raise TypeError(
                f"compile_and_export(): filename must be a non-empty str, got {filename!r}"
            )
        exe = _compile(model, outputs, options)
        with open(filename, "wb") as f:
            f.write(exe.to_bytes())


def _compile(model, outputs, options):
    from poprt.runtime import DeviceManager

    if options is None:
        options = CompilerOptions()
    if not isinstance(options, CompilerOptions):
        raise TypeError(
            f"options must be poprt.compiler.CompilerOptions, got {type(options).__name__}"
        )
    if isinstance(model, onnx.ModelProto):
        proto = model
    elif isinstance(model, (bytes, str)):
        data = model.encode("latin-1") if isinstance(model, str) else model
        try:
            proto = onnx.ModelProto.FromString(data)
        except Exception as exc:  # noqa: BLE001 - protobuf's DecodeError
            raise RuntimeError(f"cannot parse the ONNX model: {exc}") from exc
    else:
        raise TypeError(f"model must be bytes or onnx.ModelProto, got {type(model).__name__}")
    if not isinstance(outputs, (list, tuple)) or not all(isinstance(o, str) for o in outputs):
        raise TypeError(f"outputs must be List[str], got {outputs!r}")
    graph_outputs = [o.name for o in proto.graph.output]
    missing = [o for o in outputs if o not in graph_outputs]
    if missing or not outputs:
        raise RuntimeError(f"outputs {missing or outputs} are not graph outputs {graph_outputs}")
    for value in proto.graph.input:
        if any(not d.HasField("dim_value") for d in value.type.tensor_type.shape.dim):
            raise RuntimeError(
                f"input {value.name!r} has a dynamic shape: convert with input_shape first"
            )
    onnx.checker.check_model(proto)
    compiled = options.to_dict()
    compiled["ipu_version"] = compiled["ipu_version"] or DeviceManager().ipu_hardware_version()
    precision = {p.key: p.value for p in proto.metadata_props}.get("poprt_double.precision")
    if precision == "fp8" and compiled["ipu_version"] != "ipu21":
        raise RuntimeError(
            f"FP8 is not supported on {compiled['ipu_version']}: fp8 needs ipu21 (C600)"
        )
    return Executable(proto.SerializeToString(), outputs, compiled)
