"""Double of `poprt.runtime`: Runner over a PopEF file (or Executable), run by ONNX Runtime.

`execute(input, output)` requires dicts whose names, shapes and dtypes match
`get_execute_inputs()` / `get_execute_outputs()` exactly, and fills the caller's output arrays.
"""

from __future__ import annotations

import datetime
import os
import threading

import numpy as np

from poprt.compiler import Executable

_ORT_TYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16,
              "tensor(int32)": np.int32, "tensor(int64)": np.int64, "tensor(bool)": np.bool_,
              "tensor(double)": np.float64, "tensor(int8)": np.int8, "tensor(uint8)": np.uint8}


class RuntimeConfig:
    _FIELDS = {"timeout_ns": 0, "batching_dim": -1, "validate_io_params": True,
               "check_package_hash": True, "ring_buffer_size_multiplier": 2,
               "flush_on_waiting_outputs": False}

    def __init__(self):
        for name, default in self._FIELDS.items():
            object.__setattr__(self, name, default)

    def __setattr__(self, name, value):
        if name not in self._FIELDS:
            raise AttributeError(f"'poprt._runtime.RuntimeConfig' object has no attribute '{name}'")
        if name == "timeout_ns":
            if isinstance(value, datetime.timedelta):
                value = int(value.total_seconds() * 1e9)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise TypeError(f"RuntimeConfig.timeout_ns must be a non-negative int or timedelta, got {value!r}")
        elif type(value) is not type(self._FIELDS[name]):
            raise TypeError(f"RuntimeConfig.{name}: incompatible type {type(value).__name__}")
        object.__setattr__(self, name, value)


class PackRunnerConfig(RuntimeConfig):
    """Present so that type checks accept it; the double does not implement packing."""


class TensorInfo:
    def __init__(self, name, shape, dtype):
        self.name = name
        self.shape = list(shape)
        self._dtype = dtype

    def numpy_data_type(self):
        return self._dtype

    def __repr__(self):
        return f"TensorInfo(name={self.name!r}, shape={self.shape}, dtype={np.dtype(self._dtype).name})"


class DeviceManager:
    """One emulated C600 unless KIT_POPRT_DOUBLE_IPU_VERSION says otherwise."""

    def ipu_hardware_version(self):
        return os.environ.get("KIT_POPRT_DOUBLE_IPU_VERSION", "ipu21")

    def get_num_devices(self):
        return int(os.environ.get("KIT_POPRT_DOUBLE_NUM_DEVICES", "1"))


class _Future:
    def __init__(self, thread, errors):
        self._thread, self._errors = thread, errors

    def wait(self):
        self._thread.join()
        if self._errors:
            raise self._errors[0]


class Runner:
    """Runner(popef, config=None): popef is a PopEF path or an Executable."""

    def __init__(self, popef, config=None):
        import onnxruntime as ort

        if config is not None and not isinstance(config, RuntimeConfig):
            raise TypeError(f"Runner(): config must be RuntimeConfig or PackRunnerConfig, "
                            f"got {type(config).__name__}")
        if isinstance(popef, str):
            if not os.path.isfile(popef):
                raise RuntimeError(f"PopEF file {popef!r} does not exist")
            with open(popef, "rb") as f:
                exe = Executable.from_bytes(f.read(), popef)
        elif isinstance(popef, Executable):
            exe = popef
        else:
            raise TypeError(f"Runner(): popef must be str or Executable, got {type(popef).__name__}")
        self.config = config or RuntimeConfig()
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = int(os.environ.get("KIT_POPRT_DOUBLE_THREADS", "1"))
        self._session = ort.InferenceSession(exe.model_bytes, sess_options=opts,
                                             providers=["CPUExecutionProvider"])
        self._outputs = exe.outputs
        self._inputs = [TensorInfo(i.name, i.shape, _ORT_TYPES[i.type]) for i in self._session.get_inputs()]
        by_name = {o.name: o for o in self._session.get_outputs()}
        self._output_infos = [TensorInfo(n, self._output_shape(by_name[n]), _ORT_TYPES[by_name[n].type])
                              for n in self._outputs]

    def _output_shape(self, out):
        if all(isinstance(d, int) for d in out.shape):
            return out.shape
        feeds = {i.name: np.zeros(i.shape, dtype=i.numpy_data_type()) for i in self._inputs}
        return list(self._session.run([out.name], feeds)[0].shape)

    def get_execute_inputs(self):
        return list(self._inputs)

    def get_execute_outputs(self):
        return list(self._output_infos)

    def execute(self, input, output):  # noqa: A002 - PopRT's parameter names
        self._check(input, self._inputs, "input")
        self._check(output, self._output_infos, "output")
        results = self._session.run(self._outputs, input)
        for name, value in zip(self._outputs, results, strict=True):
            np.copyto(output[name], value)

    def execute_async(self, input, output):  # noqa: A002
        errors = []

        def work():
            try:
                self.execute(input, output)
            except BaseException as exc:  # noqa: BLE001 - surfaced by wait()
                errors.append(exc)

        thread = threading.Thread(target=work, daemon=True)
        thread.start()
        return _Future(thread, errors)

    @staticmethod
    def _check(data, infos, kind):
        if not isinstance(data, dict):
            raise TypeError(f"execute(): {kind} must be Dict[str, numpy.ndarray], got {type(data).__name__}")
        expected = {i.name for i in infos}
        if set(data) != expected:
            raise RuntimeError(f"execute(): {kind} names {sorted(data)} do not match {sorted(expected)}")
        for info in infos:
            array = data[info.name]
            if not isinstance(array, np.ndarray):
                raise TypeError(f"execute(): {kind} {info.name!r} must be numpy.ndarray")
            if list(array.shape) != info.shape:
                raise RuntimeError(f"execute(): {kind} {info.name!r} has shape {list(array.shape)}, "
                                   f"expected {info.shape}")
            if array.dtype != np.dtype(info.numpy_data_type()):
                raise RuntimeError(f"execute(): {kind} {info.name!r} has dtype {array.dtype}, "
                                   f"expected {np.dtype(info.numpy_data_type()).name}")
            if not array.flags.c_contiguous or (kind == "output" and not array.flags.writeable):
                raise RuntimeError(f"execute(): {kind} {info.name!r} must be a C-contiguous "
                                   f"{'writeable ' if kind == 'output' else ''}array")
