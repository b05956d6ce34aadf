"""A double of TensorRT's Python API (`import tensorrt`), 10.x or 11.x, that enforces its contract,
computing on the CPU through ONNX Runtime:

- the build phase: `Builder(logger)` needs a `Logger`; `OnnxParser.parse` must fill the network
  before `build_serialized_network`, and refuses bytes that are not an ONNX model (num_errors /
  get_error); a network with a dynamic dimension needs an optimization profile covering every
  input, or the build returns None (as TensorRT does, with an error in its log); flags are
  `BuilderFlag` members, the workspace a `MemoryPoolType`; TensorRT 11 (`install(version="11...")`)
  has no precision flag (FP16, INT8, BF16 were removed with weak typing: `trt.BuilderFlag.FP16`
  raises AttributeError) and its engines run at the types the graph states (the engine records the
  graph's float weight types, so a build from the fp32 file cannot pass for fp16);
- the runtime: `Runtime(logger).deserialize_cuda_engine` returns None for bytes it did not build;
  an execution context needs `set_input_shape` within the profile and `set_tensor_address` for
  every input and output before `execute_async_v3(stream)`, which reads the inputs from, and
  writes the outputs to, those addresses (real memory here: the buffers are CPU tensors), and
  without them logs the error and returns False, raising nothing and running nothing.
"""

from __future__ import annotations

import ctypes
import enum
import importlib.machinery
import json
import sys
import time
import types

import numpy as np
import onnx
import onnxruntime as ort

BUILD_S = 0.02
MAGIC = b"FAKE-TRT-ENGINE:"
NP = {1: np.float32, 10: np.float16, 7: np.int64, 6: np.int32, 3: np.int8, 9: np.bool_}


class DataType(enum.Enum):
    FLOAT = np.float32
    HALF = np.float16
    INT64 = np.int64
    INT32 = np.int32
    INT8 = np.int8
    BOOL = np.bool_


class TensorIOMode(enum.Enum):
    INPUT = 1
    OUTPUT = 2


class BuilderFlag(enum.Enum):
    FP16 = 0
    INT8 = 1
    BF16 = 2
    GPU_FALLBACK = 3
    SPARSE_WEIGHTS = 4


class BuilderFlag11(enum.Enum):
    """TensorRT 11's flags: the weak-typing precision flags are gone."""

    GPU_FALLBACK = 3
    SPARSE_WEIGHTS = 4


class MemoryPoolType(enum.Enum):
    WORKSPACE = 0


class Logger:
    WARNING = 2

    def __init__(self, severity=2):
        self.severity, self.errors = severity, []


def need(cond: bool, message: str) -> None:
    if not cond:
        raise TypeError(message)


class Network:
    def __init__(self):
        self.onnx: bytes | None = None
        self.inputs: dict[str, list[int]] = {}


class OnnxParser:
    def __init__(self, network: Network, logger: Logger):
        need(
            isinstance(network, Network) and isinstance(logger, Logger),
            "OnnxParser(network, logger)",
        )
        self.network, self.errors = network, []

    def parse_from_file(self, path: str) -> bool:
        """As parse, reading the file (and any external data beside it) from `path`."""
        need(isinstance(path, str), "OnnxParser.parse_from_file takes a path string")
        try:
            proto = onnx.load(path)
        except Exception as exc:  # noqa: BLE001
            self.errors.append(
                f"ModelImporter: failed to parse ONNX model {path} ({type(exc).__name__})"
            )
            return False
        return self.parse(proto.SerializeToString())

    def parse(self, model: bytes) -> bool:
        need(isinstance(model, bytes), "OnnxParser.parse takes the model's bytes")
        try:
            proto = onnx.load_model_from_string(model)
        except Exception as exc:  # noqa: BLE001
            self.errors.append(f"ModelImporter: failed to parse ONNX model ({type(exc).__name__})")
            return False
        if not proto.graph.node:
            self.errors.append("ModelImporter: empty graph")
            return False
        initialisers = {i.name for i in proto.graph.initializer}
        self.network.onnx = model
        self.network.inputs = {
            i.name: [
                d.dim_value if d.HasField("dim_value") else -1 for d in i.type.tensor_type.shape.dim
            ]
            for i in proto.graph.input
            if i.name not in initialisers
        }
        return True

    @property
    def num_errors(self) -> int:
        return len(self.errors)

    def get_error(self, i: int) -> str:
        return self.errors[i]


class Profile:
    def __init__(self):
        self.shapes: dict[str, tuple] = {}

    def set_shape(self, name: str, low, opt, high) -> None:
        need(
            all(len(s) == len(low) for s in (opt, high)),
            "set_shape(name, min, opt, max) of one rank",
        )
        self.shapes[name] = (tuple(low), tuple(opt), tuple(high))


class BuilderConfig:
    def __init__(self):
        self.flags, self.pools, self.profiles = set(), {}, []

    def set_flag(self, flag: BuilderFlag) -> None:
        need(
            isinstance(flag, BuilderFlag | BuilderFlag11),
            f"set_flag takes a BuilderFlag, not {flag!r}",
        )
        self.flags.add(flag.name)

    def set_memory_pool_limit(self, pool: MemoryPoolType, size: int) -> None:
        need(
            isinstance(pool, MemoryPoolType) and isinstance(size, int),
            "set_memory_pool_limit(MemoryPoolType, int)",
        )
        self.pools[pool.name] = size

    def add_optimization_profile(self, profile: Profile) -> int:
        self.profiles.append(profile)
        return len(self.profiles) - 1


class Builder:
    builds = 0

    def __init__(self, logger: Logger):
        need(isinstance(logger, Logger), "Builder(logger)")
        self.logger = logger

    def create_network(self, flags: int = 0) -> Network:
        return Network()

    def create_builder_config(self) -> BuilderConfig:
        return BuilderConfig()

    def create_optimization_profile(self) -> Profile:
        return Profile()

    def build_serialized_network(self, network: Network, config: BuilderConfig):
        if network.onnx is None:
            self.logger.errors.append("Network must have at least one output")
            return None
        dynamic = [n for n, dims in network.inputs.items() if -1 in dims]
        shapes = config.profiles[0].shapes if config.profiles else {}
        if any(n not in shapes for n in dynamic) or (dynamic and not config.profiles):
            self.logger.errors.append(
                "Network has dynamic or shape inputs, but no optimization profile has been defined"
            )
            return None
        Builder.builds += 1
        time.sleep(BUILD_S)  # a build takes time (tactic timing): the load's compile_s holds it
        meta = {
            "flags": sorted(config.flags),
            "profile": {k: v[1] for k, v in shapes.items()},
            "weight_types": weight_types(network.onnx),
        }
        return MAGIC + json.dumps(meta).encode() + b"\n" + network.onnx


def weight_types(model: bytes) -> list[str]:
    """The numpy names of the graph's floating-point weight types (what a strongly typed engine
    runs)."""
    proto = onnx.load_model_from_string(model)
    found = {
        np.dtype(NP[i.data_type]).name for i in proto.graph.initializer if i.data_type in (1, 10)
    }
    return sorted(found)


class Engine:
    def __init__(self, meta: dict, model: bytes):
        self.meta = meta
        self.session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
        self.in_names = [i.name for i in self.session.get_inputs()]
        self.out_names = [o.name for o in self.session.get_outputs()]
        proto = onnx.load_model_from_string(model)
        self.types = {
            v.name: NP[v.type.tensor_type.elem_type]
            for v in [*proto.graph.input, *proto.graph.output]
        }

    @property
    def num_io_tensors(self) -> int:
        return len(self.in_names) + len(self.out_names)

    def get_tensor_name(self, i: int) -> str:
        return [*self.in_names, *self.out_names][i]

    def get_tensor_mode(self, name: str) -> TensorIOMode:
        return TensorIOMode.INPUT if name in self.in_names else TensorIOMode.OUTPUT

    def get_tensor_dtype(self, name: str) -> DataType:
        return DataType(self.types[name])

    def create_execution_context(self) -> Context:
        return Context(self)


class Context:
    def __init__(self, engine: Engine):
        self.engine, self.shapes, self.addresses, self.executions = engine, {}, {}, 0
        self.errors: list[str] = []  # what TensorRT's logger would have printed

    def set_input_shape(self, name: str, shape) -> bool:
        need(name in self.engine.in_names, f"set_input_shape: {name} is not an input")
        profile = self.engine.meta["profile"]
        if name in profile and tuple(shape) != tuple(profile[name]):
            raise RuntimeError(
                f"set_input_shape: {tuple(shape)} is outside the profile {profile[name]}"
            )
        self.shapes[name] = tuple(shape)
        return True

    def get_tensor_shape(self, name: str) -> tuple:
        missing = [n for n in self.engine.in_names if n not in self.shapes]
        need(not missing, f"get_tensor_shape before set_input_shape of {missing}")
        feeds = {n: np.zeros(s, self.engine.types[n]) for n, s in self.shapes.items()}
        outs = dict(zip(self.engine.out_names, self.engine.session.run(None, feeds), strict=True))
        return outs[name].shape if name in outs else self.shapes[name]

    def set_tensor_address(self, name: str, address: int) -> bool:
        need(isinstance(address, int) and address > 0, "set_tensor_address(name, int pointer)")
        self.addresses[name] = address
        return True

    def execute_async_v3(self, stream_handle: int) -> bool:
        need(isinstance(stream_handle, int), "execute_async_v3(stream handle as an int)")
        missing = [
            n for n in [*self.engine.in_names, *self.engine.out_names] if n not in self.addresses
        ]
        if missing or any(n not in self.shapes for n in self.engine.in_names):
            # TensorRT logs an API usage error and returns False: nothing ran, nothing raised
            self.errors.append(f"enqueueV3: tensor addresses or input shapes not set: {missing}")
            return False
        feeds = {
            n: at(self.addresses[n], self.shapes[n], self.engine.types[n]).copy()
            for n in self.engine.in_names
        }
        for name, value in zip(
            self.engine.out_names, self.engine.session.run(None, feeds), strict=True
        ):
            at(self.addresses[name], value.shape, self.engine.types[name])[...] = value
        self.executions += 1
        return True


def at(address: int, shape, dtype) -> np.ndarray:
    """The array at `address` (the buffers are real CPU memory in this double)."""
    dtype = np.dtype(dtype)
    count = int(np.prod(shape))
    raw = (ctypes.c_byte * (count * dtype.itemsize)).from_address(address)
    return np.frombuffer(raw, dtype=dtype, count=count).reshape(shape)


class Runtime:
    def __init__(self, logger: Logger):
        need(isinstance(logger, Logger), "Runtime(logger)")

    def deserialize_cuda_engine(self, data) -> Engine | None:
        data = bytes(data)
        if not data.startswith(MAGIC):
            return None
        meta, model = data[len(MAGIC) :].split(b"\n", 1)
        return Engine(json.loads(meta), model)


def module(version: str = "10.13.0.35") -> types.ModuleType:
    trt = types.ModuleType("tensorrt")
    trt.__version__ = version
    # torch._dynamo looks modules up by spec
    trt.__spec__ = importlib.machinery.ModuleSpec("tensorrt", None)
    for obj in (Logger, Builder, OnnxParser, Runtime, MemoryPoolType, TensorIOMode, DataType):
        setattr(trt, obj.__name__, obj)
    trt.BuilderFlag = BuilderFlag if int(version.split(".")[0]) < 11 else BuilderFlag11
    return trt


def install(monkeypatch, version: str = "10.13.0.35") -> types.ModuleType:
    trt = module(version)
    monkeypatch.setitem(sys.modules, "tensorrt", trt)
    Builder.builds = 0
    return trt
