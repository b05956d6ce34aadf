"""Double of `poprt.runtime`: Runner over a PopEF file (or Executable), run by ONNX Runtime.

`execute(input, output)` requires dicts whose names, shapes and dtypes match
`get_execute_inputs()` / `get_execute_outputs()` exactly, and fills the caller's output arrays.
"""

from __future__ import annotations

import datetime
import fcntl
import os
import tempfile
import threading
import time

import numpy as np

from poprt.compiler import Executable

_ORT_TYPES = {
    "tensor(float)": np.float32,
    "tensor(float16)": np.float16,
    "tensor(int32)": np.int32,
    "tensor(int64)": np.int64,
    "tensor(bool)": np.bool_,
    "tensor(double)": np.float64,
    "tensor(int8)": np.int8,
    "tensor(uint8)": np.uint8,
}


_ASYNC_NAMES = ("execute_async", "executeAsync")
_MODEL_IO_NAMES = ("get_model_inputs", "get_model_outputs")


def _env_seconds(name, default):
    return float(os.environ.get(name, default))


def _release():
    """(major, minor) of the PopRT emulated: KIT_POPRT_DOUBLE_VERSION, default 1.4.0."""
    major, minor = os.environ.get("KIT_POPRT_DOUBLE_VERSION", "1.4.0").split(".")[:2]
    return int(major), int(minor)


def _absent(owner, name):
    raise AttributeError(
        f"'poprt._runtime.{owner}' object has no attribute '{name}' "
        f"(PopRT {'.'.join(map(str, _release()))} as documented)"
    )


class Device:
    """An IPU DeviceManager attached (held until this object goes); no id attribute is
    documented."""

    def __init__(self, index, lock):
        self._index, self._lock = index, lock

    def ipu_version(self):
        return DeviceManager().ipu_hardware_version()


class ReplicaIdToDevice(dict):
    """Replica id -> Device (PopRT 1.3 and later: RuntimeConfig.replica_to_device)."""

    def __setitem__(self, replica, device):
        if not isinstance(replica, int) or not isinstance(device, Device):
            raise TypeError(
                f"ReplicaIdToDevice: int -> Device, got {replica!r} -> {type(device).__name__}"
            )
        super().__setitem__(replica, device)


class RuntimeConfig:
    """PopRT's documented defaults: timeout_ns 10 ms (0 = wait forever for input data)."""

    _FIELDS = {
        "timeout_ns": 10_000_000,
        "batching_dim": -1,
        "validate_io_params": True,
        "check_package_hash": True,
        "ring_buffer_size_multiplier": 2,
        "flush_on_waiting_outputs": False,
        "thread_safe": True,
        "replica_to_device": ReplicaIdToDevice(),
    }

    def __init__(self):
        for name, default in self._FIELDS.items():
            object.__setattr__(
                self, name, type(default)() if isinstance(default, dict) else default
            )

    def _has(self, name):
        """replica_to_device: RuntimeConfig's in PopRT 1.3 and later (C++ replicaIdToDevice); no
        PackRunnerConfig has it."""
        if name == "replica_to_device":
            return type(self) is RuntimeConfig and _release() >= (1, 3)
        return name in self._FIELDS

    def __getattribute__(self, name):
        if name == "replica_to_device" and not object.__getattribute__(self, "_has")(name):
            _absent(type(self).__name__, name)
        return object.__getattribute__(self, name)

    def __setattr__(self, name, value):
        if not self._has(name):
            raise AttributeError(
                f"'poprt._runtime.{type(self).__name__}' object has no attribute '{name}'"
            )
        if name == "timeout_ns":
            if isinstance(value, datetime.timedelta):
                value = int(value.total_seconds() * 1e9)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise TypeError(
                    "RuntimeConfig.timeout_ns must be a non-negative int or timedelta, got "
                    f"{value!r}"
                )
        elif type(value) is not type(self._FIELDS[name]):
            raise TypeError(
                f"{type(self).__name__}.{name}: incompatible type {type(value).__name__}"
            )
        object.__setattr__(self, name, value)


class PackAlgorithm:
    first_fit = "first_fit"
    next_fit = "next_fit"


class PackRunnerConfig(RuntimeConfig):
    """PackRunnerConfig(timeout_microseconds=0, max_valid_num=0, dynamic_input_name='',
    unpack_info_input_name=''), as in PopRT's C++ API."""

    _FIELDS = {
        **RuntimeConfig._FIELDS,
        "timeout_microseconds": 0,
        "max_valid_num": 0,
        "dynamic_input_name": "",
        "unpack_info_input_name": "",
        "algorithm": PackAlgorithm.next_fit,
        "mask_name": "",
        "dynamic_group": [],
        "enable_padding_remove": False,
        "disable_data_across_rows": False,
        "delimiter_num": 0,
        "enable_prefetch_datastreams": True,
    }

    def __init__(
        self,
        timeout_microseconds=0,
        max_valid_num=0,
        dynamic_input_name="",
        unpack_info_input_name="",
    ):
        super().__init__()
        self.timeout_microseconds = timeout_microseconds
        self.max_valid_num = max_valid_num
        self.dynamic_input_name = dynamic_input_name
        self.unpack_info_input_name = unpack_info_input_name

    def __setattr__(self, name, value):
        if name == "algorithm" and value not in (PackAlgorithm.first_fit, PackAlgorithm.next_fit):
            raise TypeError(f"PackRunnerConfig.algorithm must be a PackAlgorithm, got {value!r}")
        super().__setattr__(name, value)

    def enable_input_single_row_mode(self, mask_name, unpack_info_name="", delimiter_num=0):
        self.mask_name, self.disable_data_across_rows = str(mask_name), True
        self.unpack_info_input_name, self.delimiter_num = str(unpack_info_name), int(delimiter_num)

    def enable_padding_remove_mode(self, mask_name, dynamic_group):
        if not isinstance(dynamic_group, list) or not all(
            isinstance(n, str) for n in dynamic_group
        ):
            raise TypeError("enable_padding_remove_mode(): dynamic_group must be List[str]")
        self.mask_name, self.dynamic_group, self.enable_padding_remove = (
            str(mask_name),
            list(dynamic_group),
            True,
        )


class TensorInfo:
    def __init__(self, name, shape, dtype):
        self.name = name
        self.shape = list(shape)
        self._dtype = dtype

    def numpy_data_type(self):
        return self._dtype

    def __repr__(self):
        return (
            f"TensorInfo(name={self.name!r}, shape={self.shape}, dtype={np.dtype(self._dtype).name}"
            ")"
        )


class DeviceManager:
    """One emulated C600 unless KIT_POPRT_DOUBLE_IPU_VERSION / _NUM_DEVICES say otherwise."""

    def ipu_hardware_version(self):
        return os.environ.get("KIT_POPRT_DOUBLE_IPU_VERSION", "ipu21")

    def get_num_devices(self):
        return int(os.environ.get("KIT_POPRT_DOUBLE_NUM_DEVICES", "1"))

    def __getattribute__(self, name):
        if name == "get_specific_device" and _release() < (1, 3):
            _absent("DeviceManager", name)
        return object.__getattribute__(self, name)

    def get_specific_device(self, device_id):
        """Attach IPU `device_id` (PopRT 1.3 and later), or raise as PopRT does when it is busy."""
        if not isinstance(device_id, int) or not 0 <= device_id < self.get_num_devices():
            raise RuntimeError(f"get_specific_device(): no device {device_id!r}")
        handle = open(os.path.join(_state_dir(), f"ipu{device_id}.lock"), "a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            raise RuntimeError(
                f"Failed to attach to device {device_id}: it is in use by another process"
            ) from None
        return Device(device_id, handle)


def _state_dir():
    """Where the emulated IPUs' locks live: one machine-wide folder, as /dev/ipuN is."""
    path = os.environ.get("KIT_POPRT_DOUBLE_STATE") or os.path.join(
        tempfile.gettempdir(), f"kit-poprt-double-{os.getuid()}"
    )
    os.makedirs(path, exist_ok=True)
    return path


def _attach():
    """Lock a free emulated IPU, waiting like DeviceWaitConfig (1 s), then fail like PopRT does."""
    count = DeviceManager().get_num_devices()
    deadline = time.monotonic() + _env_seconds("KIT_POPRT_DOUBLE_ATTACH_WAIT_S", "1.0")
    while True:
        for device in range(count):
            handle = open(os.path.join(_state_dir(), f"ipu{device}.lock"), "a+")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                handle.close()
                continue
            return device, handle
        if time.monotonic() >= deadline:
            raise RuntimeError(
                f"Failed to attach to any IPU device: all {count} device(s) are in use by "
                "another process (ModelRunner could not acquire a device)"
            )
        time.sleep(0.02)


class _Future:
    def __init__(self, thread, errors):
        self._thread, self._errors = thread, errors

    def wait(self):
        self._thread.join()
        if self._errors:
            raise self._errors[0]


class Runner:
    """Runner(popef, config=None): popef is a PopEF path or an Executable.

    Like the hardware: creating it attaches one IPU (an exclusive lock; a busy device is refused
    after the wait) and loads the PopEF (a delay, KIT_POPRT_DOUBLE_ATTACH_S). One IPU executes one
    request at a time: client threads share it serially. With I/O tiles or batches_per_step > 1 the
    IPU needs PIPELINE_DEPTH requests in flight; with fewer it waits `timeout_ns` and flushes, and
    with timeout_ns == 0 it waits forever (here: KIT_POPRT_DOUBLE_HANG_S, then an error).
    """

    PIPELINE_DEPTH = 3  # "At least three threads are required" (PopRT overlap I/O docs)

    def __init__(self, popef, config=None):
        import onnxruntime as ort

        if config is not None and not isinstance(config, RuntimeConfig):
            raise TypeError(
                f"Runner(): config must be RuntimeConfig or PackRunnerConfig, "
                f"got {type(config).__name__}"
            )
        if isinstance(popef, str):
            if not os.path.isfile(popef):
                raise RuntimeError(f"PopEF file {popef!r} does not exist")
            with open(popef, "rb") as f:
                exe = Executable.from_bytes(f.read(), popef)
        elif isinstance(popef, Executable):
            exe = popef
        else:
            raise TypeError(
                f"Runner(): popef must be str or Executable, got {type(popef).__name__}"
            )
        version = DeviceManager().ipu_hardware_version()
        if exe.options.get("ipu_version") not in ("", version):
            raise RuntimeError(
                f"the PopEF was compiled for {exe.options['ipu_version']}, the device is {version}"
            )
        self.config = config or RuntimeConfig()
        self.options = exe.options
        named = (
            self.config.replica_to_device.get(0) if self.config._has("replica_to_device") else None
        )
        # the IPU the config names, else the first free one
        self._device = named or Device(*_attach())
        time.sleep(_env_seconds("KIT_POPRT_DOUBLE_ATTACH_S", "0.5"))  # attach + load the PopEF
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = int(os.environ.get("KIT_POPRT_DOUBLE_THREADS", "1"))
        self._session = ort.InferenceSession(
            exe.model_bytes, sess_options=opts, providers=["CPUExecutionProvider"]
        )
        self._outputs = exe.outputs
        self._inputs = [
            TensorInfo(i.name, i.shape, _ORT_TYPES[i.type]) for i in self._session.get_inputs()
        ]
        by_name = {o.name: o for o in self._session.get_outputs()}
        self._output_infos = [
            TensorInfo(n, self._output_shape(by_name[n]), _ORT_TYPES[by_name[n].type])
            for n in self._outputs
        ]
        self._ipu = threading.Lock()  # one IPU: one execute at a time
        self._flight = threading.Condition()
        self._in_flight = 0
        self.pipelined = (
            exe.options.get("num_io_tiles", 0) > 0 or exe.options.get("batches_per_step", 1) > 1
        )
        self._pack = (
            _Packer(self, self.config) if isinstance(self.config, PackRunnerConfig) else None
        )

    def _output_shape(self, out):
        if all(isinstance(d, int) for d in out.shape):
            return out.shape
        feeds = {i.name: np.zeros(i.shape, dtype=i.numpy_data_type()) for i in self._inputs}
        return list(self._session.run([out.name], feeds)[0].shape)

    def get_execute_inputs(self):
        """One execute call's inputs: for a PackRunner one sample (dim 0 is 1), not the compiled
        batch, which get_model_inputs describes."""
        return self._per_call(self._inputs)

    def get_execute_outputs(self):
        return self._per_call(self._output_infos)

    def get_model_inputs(self):
        """The compiled model's inputs: documented on a Runner in PopRT 1.1 / 1.2 only."""
        return list(self._inputs)

    def get_model_outputs(self):
        return list(self._output_infos)

    def _per_call(self, infos):
        """A PackRunner's execute call takes one sample: one row of each compiled input and output
        (a 1-D one's share of values)."""
        if self._pack is None:
            return list(infos)
        rows = self._inputs_by_name()[self.config.dynamic_input_name].shape[0]
        return [
            TensorInfo(
                i.name,
                [1, *i.shape[1:]] if len(i.shape) > 1 else [i.shape[0] // rows],
                i.numpy_data_type(),
            )
            for i in infos
        ]

    def _inputs_by_name(self):
        return {i.name: i for i in self._inputs}

    def __getattribute__(self, name):
        """One async spelling per emulated PopRT: execute_async (1.3 and later) or executeAsync (1.1
        / 1.2; KIT_POPRT_DOUBLE_ASYNC overrides); get_model_inputs / get_model_outputs in 1.1 / 1.2
        only."""
        if name in _ASYNC_NAMES:
            spelled = os.environ.get("KIT_POPRT_DOUBLE_ASYNC") or (
                "execute_async" if _release() >= (1, 3) else "executeAsync"
            )
            if name != spelled:
                _absent("Runner", name)
        if name in _MODEL_IO_NAMES and _release() >= (1, 3):
            _absent("Runner", name)
        return object.__getattribute__(self, name)

    def execute(self, input, output):  # noqa: A002 - PopRT's parameter names
        if self._pack is not None:
            self._pack.submit(input, output).wait()
            return
        self._check(input, self._inputs, "input")
        self._check(output, self._output_infos, "output")
        with self._flight:
            self._in_flight += 1
            self._flight.notify_all()
        try:
            if self.pipelined:
                self._wait_for_pipeline()
            with self._ipu:
                results = self._session.run(self._outputs, input)
        finally:
            with self._flight:
                self._in_flight -= 1
        for name, value in zip(self._outputs, results, strict=True):
            np.copyto(output[name], value)

    def _wait_for_pipeline(self):
        timeout_ns = self.config.timeout_ns
        limit = timeout_ns / 1e9 if timeout_ns else _env_seconds("KIT_POPRT_DOUBLE_HANG_S", "2.0")
        with self._flight:
            full = self._flight.wait_for(
                lambda: self._in_flight >= self.PIPELINE_DEPTH, timeout=limit
            )
        if not full and not timeout_ns:
            raise TimeoutError(
                f"the IPU waited {limit:g} s for input data: with I/O tiles or batches_per_step > "
                f"1 it needs {self.PIPELINE_DEPTH} requests in flight, had {self._in_flight}, and "
                "RuntimeConfig.timeout_ns = 0 means wait forever (on hardware this run hangs)"
            )

    def execute_async(self, input, output):  # noqa: A002
        if self._pack is not None:
            return self._pack.submit(input, output)
        errors = []

        def work():
            try:
                self.execute(input, output)
            except BaseException as exc:  # noqa: BLE001 - surfaced by wait()
                errors.append(exc)

        thread = threading.Thread(target=work, daemon=True)
        thread.start()
        return _Future(thread, errors)

    executeAsync = execute_async  # noqa: N815 - PopRT 1.1 / 1.2's name

    def pack_stats(self):
        """Double only: how the pack runner grouped samples (packs, samples, rows used)."""
        return dict(self._pack.stats) if self._pack else None

    @staticmethod
    def _check(data, infos, kind):
        if not isinstance(data, dict):
            raise TypeError(
                f"execute(): {kind} must be Dict[str, numpy.ndarray], got {type(data).__name__}"
            )
        expected = {i.name for i in infos}
        if set(data) != expected:
            raise RuntimeError(
                f"execute(): {kind} names {sorted(data)} do not match {sorted(expected)}"
            )
        for info in infos:
            array = data[info.name]
            if not isinstance(array, np.ndarray):
                raise TypeError(f"execute(): {kind} {info.name!r} must be numpy.ndarray")
            if list(array.shape) != info.shape:
                raise RuntimeError(
                    f"execute(): {kind} {info.name!r} has shape {list(array.shape)}, "
                    f"expected {info.shape}"
                )
            if array.dtype != np.dtype(info.numpy_data_type()):
                raise RuntimeError(
                    f"execute(): {kind} {info.name!r} has dtype {array.dtype}, "
                    f"expected {np.dtype(info.numpy_data_type()).name}"
                )
            if not array.flags.c_contiguous or (kind == "output" and not array.flags.writeable):
                raise RuntimeError(
                    f"execute(): {kind} {info.name!r} must be a C-contiguous "
                    f"{'writeable ' if kind == 'output' else ''}array"
                )


class _PackFuture:
    def __init__(self):
        self._done = threading.Event()
        self.error = None

    def wait(self):
        self._done.wait()
        if self.error is not None:
            raise self.error


class _Packer:
    """The PackRunner far enough to test the kit: single samples in, packed by first_fit (or
    next_fit) into the compiled batch's rows until max_valid_num samples, no room, or
    timeout_microseconds after the first waiting sample; then one execution, outputs unpacked.
    As on the IPU, samples that fit share a row (single-row mode: a sample never spans two rows),
    each at its own offset, the mask holding k over the k-th sample of a row (PopRT's
    packed_bert_example lays packed rows out so): the model keeps them apart only where
    insert_attention_mask's AttentionMask made its attention packing-aware. A graph whose pass did
    not fire reads the mask as 1/0 and mixes the samples (or overflows), as on such an IPU."""

    def __init__(self, runner, config):
        infos = {i.name: i for i in runner._inputs}
        if config.timeout_microseconds <= 0 or config.max_valid_num <= 0:
            raise RuntimeError(
                "PackRunnerConfig: timeout_microseconds and max_valid_num must be > 0"
            )
        if config.dynamic_input_name not in infos:
            raise RuntimeError(
                f"PackRunnerConfig.dynamic_input_name {config.dynamic_input_name!r} is not a "
                f"model input {sorted(infos)}"
            )
        if not config.mask_name or config.mask_name not in infos:
            raise RuntimeError(
                f"PackRunnerConfig: enable_input_single_row_mode(mask) needs a model input as "
                f"mask, got {config.mask_name!r}"
            )
        if config.unpack_info_input_name and config.unpack_info_input_name not in infos:
            raise RuntimeError(
                f"unpack_info input {config.unpack_info_input_name!r} is not a model input "
                "(the model needs a pass that adds it)"
            )
        self.runner, self.config, self.infos = runner, config, infos
        self.rows, self.seq = infos[config.dynamic_input_name].shape[:2]
        self.queue, self.cond = [], threading.Condition()
        self.stats = {"packs": 0, "samples": 0, "rows_used": 0, "tokens": 0, "zero_filled": []}
        threading.Thread(target=self._loop, daemon=True).start()

    def submit(self, feeds, outputs):
        sample = self._validate(feeds, outputs)
        future = _PackFuture()
        with self.cond:
            self.queue.append((time.monotonic(), sample, outputs, future))
            self.cond.notify()
        return future

    def _validate(self, feeds, outputs):
        if not isinstance(feeds, dict) or not isinstance(outputs, dict):
            raise TypeError("execute(): input and output must be Dict[str, numpy.ndarray]")
        unknown = sorted(set(feeds) - set(self.infos))
        required = {
            self.config.mask_name,
            self.config.dynamic_input_name,
            *self.config.dynamic_group,
        }
        # others (position_ids) are zero-filled, as ByteMLPerf relies on
        missing = sorted(required - set(feeds))
        if unknown or missing:
            raise RuntimeError(f"execute(): pack input names unknown {unknown}, missing {missing}")
        mask = np.asarray(feeds[self.config.mask_name]).reshape(-1)
        length = int(np.count_nonzero(mask))
        if not 0 < length <= self.seq:
            raise RuntimeError(
                f"execute(): a sample's valid length {length} is outside [1, {self.seq}]"
            )
        sample = {}
        for name, array in feeds.items():
            flat = np.asarray(array).reshape(-1)
            if flat.dtype != np.dtype(self.infos[name].numpy_data_type()):
                raise RuntimeError(
                    f"execute(): pack input {name!r} has dtype {flat.dtype}, expected "
                    f"{np.dtype(self.infos[name].numpy_data_type()).name}"
                )
            if self.config.enable_padding_remove and (
                name in self.config.dynamic_group or name == self.config.mask_name
            ):
                flat = flat[:length]
            if len(flat) != length:
                raise RuntimeError(
                    f"execute(): pack input {name!r} has {len(flat)} values for a sample of "
                    f"valid length {length} (padding removal covers {self.config.dynamic_group})"
                )
            sample[name] = flat
        for info in self.runner._output_infos:
            if info.name not in outputs or outputs[info.name].size * self.rows != int(
                np.prod(info.shape)
            ):
                raise RuntimeError(
                    f"execute(): pack output {info.name!r} must hold one row of {info.shape}"
                )
        return sample

    def _fits(self, lengths, new):
        """Rows used when `new` joins `lengths` (first_fit: first row with room; next_fit: last
        row)."""
        rows = []
        for n in [*lengths, new]:
            if self.config.algorithm == PackAlgorithm.first_fit:
                spot = next((i for i, used in enumerate(rows) if used + n <= self.seq), None)
            else:
                spot = len(rows) - 1 if rows and rows[-1] + n <= self.seq else None
            if spot is None:
                rows.append(n)
            else:
                rows[spot] += n
        return len(rows)

    def _loop(self):
        timeout = self.config.timeout_microseconds / 1e6
        while True:
            with self.cond:
                self.cond.wait_for(lambda: self.queue)
                while True:
                    lengths = [len(s[self.config.mask_name]) for _, s, _, _ in self.queue]
                    taken, n_rows = [], 0
                    for n in lengths[: self.config.max_valid_num]:
                        rows = self._fits(taken, n)
                        if rows > self.rows:
                            break
                        taken.append(n)
                        n_rows = rows
                    complete = len(taken) < len(lengths) or len(taken) >= self.config.max_valid_num
                    waited = time.monotonic() - self.queue[0][0]
                    if complete or waited >= timeout:
                        batch, self.queue = self.queue[: len(taken)], self.queue[len(taken) :]
                        break
                    self.cond.wait(timeout - waited)
            self.stats["packs"] += 1
            self.stats["samples"] += len(batch)
            self.stats["rows_used"] += n_rows
            self.stats["tokens"] += sum(len(s[self.config.mask_name]) for _, s, _, _ in batch)
            absent = sorted(set(self.infos) - set().union(*(set(s) for _, s, _, _ in batch)))
            self.stats["zero_filled"] = sorted(set(self.stats["zero_filled"]) | set(absent))
            self._execute(batch)

    def _place(self, lengths):
        """(row, offset) of each sample, by the configured algorithm; rows overflow into further
        executions of the compiled batch (chunks of self.rows rows)."""
        rows, places = [], []
        for n in lengths:
            if self.config.algorithm == PackAlgorithm.first_fit:
                spot = next((i for i, used in enumerate(rows) if used + n <= self.seq), None)
            else:
                spot = len(rows) - 1 if rows and rows[-1] + n <= self.seq else None
            if spot is None:
                rows.append(0)
                spot = len(rows) - 1
            places.append((spot, rows[spot]))
            rows[spot] += n
        return places, len(rows)

    def _execute(self, batch):
        try:
            lengths = [len(sample[self.config.mask_name]) for _, sample, _, _ in batch]
            places, n_rows = self._place(lengths)
            for first in range(0, n_rows, self.rows):
                members = [
                    (i, row - first, off)
                    for i, (row, off) in enumerate(places)
                    if first <= row < first + self.rows
                ]
                feeds = {
                    name: np.zeros(info.shape, info.numpy_data_type())
                    for name, info in self.infos.items()
                }
                for i, row, off in members:
                    for name, values in batch[i][1].items():
                        if name == self.config.mask_name:
                            # single-row mode: the k-th sample of a row is k
                            values = values * (
                                1 + sum(1 for _, r, o in members if r == row and o < off)
                            )
                        feeds[name][row, off : off + len(values)] = values
                with self.runner._ipu:
                    results = self.runner._session.run(self.runner._outputs, feeds)
                for i, row, off in members:
                    outputs = batch[i][2]
                    for name, value in zip(self.runner._outputs, results, strict=True):
                        piece = value[row][off : off + lengths[i]].reshape(-1)
                        out = outputs[name].reshape(-1)
                        out[:] = 0
                        out[: piece.size] = piece
            error = None
        except BaseException as exc:  # noqa: BLE001 - surfaced by wait()
            error = exc
        for _, _, _, future in batch:
            future.error = error
            future._done.set()
