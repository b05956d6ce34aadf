"""The kit's PopRT worker: one long-lived process per IPU session.

PopRT only supports Python 3.8 (Poplar SDK / graphcorecn/poprt image), so this file runs apart from
the kit, under that interpreter. It must stay Python-3.8 compatible (tests check it with vermin and
`ast.parse(feature_version=(3, 8))`) and import only the standard library, numpy, onnx, poprt and
the SDK's gcipuinfo.

    python3 ipu_worker.py --serve        requests on stdin, replies on stdout (framed, see below)

Each request is a dict with "op"; each reply is {"ok": True, "result": ...} or {"ok": False,
"error": "Type: message", "traceback": ...}. Ops:
    probe     versions and the device: PopRT's ipu_hardware_version() and get_num_devices()
    load      check the hardware, convert + compile (PopEF cached on disk by model and options),
              then create the Runner once: the IPU is attached and the PopEF loaded here
    run       execute once on the given inputs and return the outputs
    measure   warm-up, then the timed calls of every client thread on the one Runner, with the
              power sensors read over exactly those calls (warm-up stays outside the window)
    close     release the Runner and exit

Frames: a little-endian header (head length u64, buffer count u32), the buffer lengths (u64 each),
a pickle (protocol 5) whose numpy arrays travel out of band as raw buffers (no base64, no JSON).
Arrays are sent as (dtype, shape, buffer) so either side's numpy version can read them.
"""

import hashlib
import json
import os
import pickle
import platform
import random
import struct
import subprocess
import sys
import threading
import time
import traceback
from contextlib import contextmanager

import numpy as np

WORKER_VERSION = 3
FP8_OPS = ("Conv", "MatMul", "Gemm")
FP8_IPU_VERSIONS = ("ipu21",)
TEST_DOUBLE_NOTE = "not run on an IPU: PopRT test double over ONNX Runtime"
PACK_SAMPLES_PER_ROW = 100  # benchmark_pack draws iterations (100) x pack batch sample lengths
_ARRAY = "__kit_ndarray__"
_HEADER = struct.Struct("<QI")


class HardwareError(RuntimeError):
    """The IPU present cannot run what was asked (fp8 on ipu2, no device...)."""


# --- framing ------------------------------------------------------------------------------------

def _pack(obj):
    if isinstance(obj, np.ndarray):
        array = np.ascontiguousarray(obj)
        return (_ARRAY, array.dtype.str, list(array.shape), pickle.PickleBuffer(array))
    if isinstance(obj, dict):
        return {k: _pack(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_pack(v) for v in obj)
    return obj


def _unpack(obj):
    if isinstance(obj, tuple) and len(obj) == 4 and obj[0] == _ARRAY:
        return np.frombuffer(obj[3], dtype=np.dtype(obj[1])).reshape(obj[2])
    if isinstance(obj, dict):
        return {k: _unpack(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_unpack(v) for v in obj)
    return obj


def write_message(stream, obj):
    """Frame and write one message; arrays go as raw out-of-band buffers."""
    buffers = []
    head = pickle.dumps(_pack(obj), protocol=5, buffer_callback=buffers.append)
    raws = [b.raw() for b in buffers]
    parts = [_HEADER.pack(len(head), len(raws))]
    parts += [struct.pack("<Q", r.nbytes) for r in raws]
    stream.write(b"".join(parts) + head)
    for raw in raws:
        stream.write(raw)
    stream.flush()


def _read_exact(stream, size):
    buf = bytearray(size)
    view = memoryview(buf)
    got = 0
    while got < size:
        n = stream.readinto(view[got:])
        if not n:
            raise EOFError(f"the other side closed the pipe after {got} of {size} bytes")
        got += n
    return buf


def read_message(stream):
    """Read one framed message (EOFError when the other side has gone)."""
    head_size, count = _HEADER.unpack(_read_exact(stream, _HEADER.size))
    sizes = struct.unpack(f"<{count}Q", _read_exact(stream, 8 * count)) if count else ()
    head = _read_exact(stream, head_size)
    buffers = [_read_exact(stream, size) for size in sizes]
    return _unpack(pickle.loads(head, buffers=buffers))


# --- environment and hardware ----------------------------------------------------------------------

def environment():
    """Versions and the device as PopRT reports them; device errors are reported, not raised."""
    import poprt
    from poprt import runtime

    info = {"worker_version": WORKER_VERSION, "python": platform.python_version(),
            "numpy": np.__version__, "poprt_version": getattr(poprt, "__version__", "unknown"),
            "test_double": bool(getattr(poprt, "__kit_test_double__", False)),
            "gcda_monitor": os.environ.get("GCDA_MONITOR")}
    if info["test_double"]:
        info["note"] = TEST_DOUBLE_NOTE
    try:
        manager = runtime.DeviceManager()
        info["device"] = {"ipu_version": manager.ipu_hardware_version(),
                          "num_devices": int(manager.get_num_devices()), "board": board_description()}
    except Exception as exc:  # noqa: BLE001 - no IPU attached, driver missing...
        info["device"] = {"error": f"{type(exc).__name__}: {exc}"}
    return info


def board_description():
    """The first IPU's "board type" and "board variant" (gc-info's attributes, read through the SDK's
    gcipuinfo): what tells a Bow from an M2000, both ipu2 to PopRT. None where unreadable."""
    try:
        import gcipuinfo

        devices = gcipuinfo.gcipuinfo().getDevices()
        first = dict(devices[0]) if devices else {}
    except Exception:  # noqa: BLE001 - no SDK module, no device: the kit then asks for KIT_IPU_PART
        return None
    return " ".join(str(first[k]) for k in ("board type", "board variant") if k in first) or None


def check_hardware(device, precision):
    """Before compiling: an IPU is present, and it can run `precision`."""
    if "error" in device:
        raise HardwareError("no IPU readable: " + device["error"])
    if int(device.get("num_devices", 0)) < 1:
        raise HardwareError("PopRT sees no IPU device (get_num_devices() == 0)")
    if precision == "fp8" and device.get("ipu_version") not in FP8_IPU_VERSIONS:
        raise HardwareError("fp8 needs a C600 (ipu21); this IPU is {!r}, which has no fp8 "
                            "(run fp16 here)".format(device.get("ipu_version")))


# --- compile ---------------------------------------------------------------------------------------

def batched_shape(spec, batch_size):
    shape = list(spec["shape"])
    if spec.get("batched", True):
        shape[0] = shape[0] * batch_size
    return shape


def converter_kwargs(job):
    kwargs = dict(job.get("converter_options") or {})
    kwargs["input_shape"] = {s["name"]: batched_shape(s, job["batch_size"]) for s in job["inputs"]}
    kwargs["precision"] = job["precision"]
    return kwargs


def compiler_options(job, ipu_version):
    """CompilerOptions with every given attribute set (PopRT raises on an unknown one)."""
    from poprt.compiler import CompilerOptions

    wanted = dict(job.get("compiler_options") or {})
    if not wanted.get("ipu_version") and ipu_version:
        wanted["ipu_version"] = ipu_version
    opts = CompilerOptions()
    for name in sorted(wanted):
        try:
            setattr(opts, name, wanted[name])
        except AttributeError:
            raise ValueError(f"unknown compiler option {name!r} (PopRT's CompilerOptions has no such "
                             "attribute)") from None
    return opts, wanted


def file_digest(path):
    digest = hashlib.sha1()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def popef_path(job, kwargs, options, poprt_version):
    """Cache key: model bytes + every option + pack preparation + the PopRT version."""
    key = json.dumps({"model": file_digest(job["onnx_path"]), "converter": kwargs, "compiler": options,
                      "pack": job.get("pack_inputs"), "poprt": poprt_version,
                      "worker": WORKER_VERSION}, sort_keys=True, default=str)
    digest = hashlib.sha1(key.encode()).hexdigest()[:16]
    stem = os.path.splitext(os.path.basename(job["onnx_path"]))[0]
    name = "{}-{}-bs{}-{}.popef".format(stem, job["precision"], job["batch_size"], digest)
    return os.path.join(job["cache_dir"], name)


def add_position_ids(model, input_name, like):
    """The kit's equivalent of ByteMLPerf's _update_pack_model: the position-embedding Gather reads
    its indices from a new int input `input_name` (shaped like input `like`), per-sample positions."""
    import copy

    inits = {i.name for i in model.graph.initializer}
    gathers = [n for n in model.graph.node if n.op_type == "Gather" and n.input[0] in inits
               and "position_embeddings" in (n.input[0] + n.name)]
    if len(gathers) != 1:
        raise ValueError("pack mode needs exactly one position-embedding Gather to feed position_ids; "
                         f"found {[n.name for n in gathers]}")
    template = next(i for i in model.graph.input if i.name == like)
    new_input = copy.deepcopy(template)
    new_input.name = input_name
    model.graph.input.append(new_input)
    gathers[0].input[1] = input_name
    remove_dead_nodes(model)
    return model


def remove_dead_nodes(model):
    """Drop nodes whose outputs nothing reads (what removing ByteMLPerf's named nodes achieves)."""
    graph = model.graph
    while True:
        used = {o.name for o in graph.output}
        for node in graph.node:
            used.update(node.input)
        dead = [n for n in graph.node if not any(o in used for o in n.output)]
        if not dead:
            return
        for node in dead:
            graph.node.remove(node)


INPUT_CAST = "Cast(graph input)"  # a pseudo op type: Casts that read a graph input directly


def op_types(model):
    """How many nodes of each op type the graph has, plus INPUT_CAST (the kit judges from them
    whether a pass fired)."""
    counts = {}
    inputs = {i.name for i in model.graph.input}
    for node in model.graph.node:
        counts[node.op_type] = counts.get(node.op_type, 0) + 1
        if node.op_type == "Cast" and node.input and node.input[0] in inputs:
            counts[INPUT_CAST] = counts.get(INPUT_CAST, 0) + 1
    return counts


def graph_record_path(popef):
    return popef + ".ops.json"


def read_graph_record(popef):
    """The op types recorded when this PopEF was converted, or None (a PopEF from before they were)."""
    try:
        with open(graph_record_path(popef)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def compile_popef(job, env):
    """Convert + compile_and_export once per key; returns (path, compile seconds, cached, kwargs,
    options, memory: each step's peak RSS, or why none was measured)."""
    import onnx
    from poprt.compiler import Compiler
    from poprt.converter import Converter

    kwargs = converter_kwargs(job)
    opts, wanted = compiler_options(job, env.get("device", {}).get("ipu_version"))
    path = popef_path(job, kwargs, wanted, env["poprt_version"])
    if os.path.exists(path):
        return path, 0.0, True, kwargs, wanted, {"status": "PopEF from the cache: no conversion ran"}
    os.makedirs(job["cache_dir"], exist_ok=True)
    started = time.perf_counter()
    memory = StepMemory(job.get("memory_needs") or {})
    with memory.step("ipu-convert"):
        model = onnx.load(job["onnx_path"])
        pack_inputs = job.get("pack_inputs") or {}
        if pack_inputs.get("add") == "position_ids":
            add_position_ids(model, "position_ids", job["pack"]["dynamic_input_name"])
            dynamic = next(s for s in job["inputs"] if s["name"] == job["pack"]["dynamic_input_name"])
            kwargs["input_shape"]["position_ids"] = batched_shape(dynamic, job["batch_size"])
        before = op_types(model)
        converted = Converter(**kwargs).convert(model)
        del model  # the converted copy is all the compiler needs
        record = {"op_types_before": before, "op_types_after": op_types(converted)}
    with memory.step("ipu-compile"):
        outputs = [o.name for o in converted.graph.output]
        tmp = f"{path}.{os.getpid()}.tmp"
        Compiler.compile_and_export(converted.SerializeToString(), outputs, tmp, opts)
    with open(graph_record_path(tmp), "w") as f:
        json.dump(record, f)
    os.replace(graph_record_path(tmp), graph_record_path(path))
    os.replace(tmp, path)
    return path, time.perf_counter() - started, False, kwargs, wanted, memory.to_dict()


# --- memory: each step's peak, and a check before it ------------------------------------------------

class InsufficientMemory(MemoryError):
    """A step's known need is above the memory available (the kit raises its own class for it)."""


MEMORY_METHOD = ("VmHWM of the PopRT worker (/proc/self/status), reset before each step through "
                 "/proc/self/clear_refs")


def status_bytes(field, status="/proc/self/status"):
    """A memory line of this process's status (VmHWM: peak resident set, VmRSS: now) in bytes, or
    None where /proc is unreadable."""
    try:
        with open(status) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def peak_rss_bytes(status="/proc/self/status"):
    return status_bytes("VmHWM", status)


def reset_peak_rss(clear_refs="/proc/self/clear_refs"):
    """Reset VmHWM to the current RSS (Linux 4.0 and later); False where that is not allowed."""
    try:
        with open(clear_refs, "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def available_memory_bytes(meminfo="/proc/meminfo", cgroup="/sys/fs/cgroup"):
    """MemAvailable, capped by a cgroup v2 limit (the PopRT container's); None where unreadable."""
    available = None
    try:
        with open(meminfo) as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    available = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    try:
        with open(os.path.join(cgroup, "memory.max")) as f:
            limit = f.read().strip()
        with open(os.path.join(cgroup, "memory.current")) as f:
            used = int(f.read().strip())
        if limit != "max" and available is not None:
            available = min(available, max(int(limit) - used, 0))
    except (OSError, ValueError):
        pass
    return available


class StepMemory:
    """Each step's peak RSS (VmHWM reset before it) and RSS before it; before a step whose need the
    kit knows (what the step added on an earlier run: its peak less the RSS before it), compared
    with the memory available, InsufficientMemory when that is less."""

    def __init__(self, needs):
        self.needs = needs  # step -> {"bytes": need, "source": how it is known}
        self.steps = {}
        self.reset_everywhere = True

    def check(self, step):
        need = self.needs.get(step)
        available = available_memory_bytes()
        if need is not None and available is not None and need["bytes"] > available:
            raise InsufficientMemory("{} needs about {:.1f} GB, {:.1f} GB available ({})".format(
                step, need["bytes"] / 1e9, available / 1e9, need["source"]))
        return available

    @contextmanager
    def step(self, name):
        available = self.check(name)
        self.reset_everywhere = reset_peak_rss() and self.reset_everywhere
        before = status_bytes("VmRSS")
        started = time.perf_counter()
        yield
        checked = (self.needs.get(name) or {}).get("bytes") if available is not None else None
        self.steps[name] = {"peak_rss_bytes": peak_rss_bytes(), "rss_before_bytes": before,
                            "seconds": round(time.perf_counter() - started, 2),
                            "available_before_bytes": available, "need_checked_bytes": checked}

    def to_dict(self):
        method = MEMORY_METHOD if self.reset_everywhere else (
            "VmHWM of the PopRT worker (/proc/self/status); /proc/self/clear_refs could not reset it, so "
            "each step's peak is the worker's peak since it started")
        return {"status": "measured", "steps": self.steps, "method": method}


# --- the session -------------------------------------------------------------------------------------

def runtime_config(pack):
    """RuntimeConfig with PopRT's defaults (timeout_ns stays 10 ms), or ByteMLPerf's PackRunnerConfig."""
    from poprt import runtime

    if not pack:
        return runtime.RuntimeConfig()
    config = runtime.PackRunnerConfig()
    config.enable_input_single_row_mode(pack["mask_name"])
    config.dynamic_input_name = pack["dynamic_input_name"]
    config.timeout_microseconds = int(pack["timeout_microseconds"])
    config.algorithm = getattr(runtime.PackAlgorithm, pack["algorithm"])
    config.max_valid_num = int(pack["max_valid_num"])
    config.enable_padding_remove_mode(
        pack["mask_name"], [n for n in pack["input_names"] if n != pack["mask_name"]])
    return config


class Session:
    """The Runner and what was staged for it; one per worker process."""

    def __init__(self):
        self.env = None
        self.runner = None
        self.job = None
        self.pack = None

    def probe(self, _msg):
        if self.env is None:
            self.env = environment()
        return self.env

    def load(self, job):
        from poprt import runtime

        if self.runner is not None:
            raise RuntimeError("this worker already holds a Runner; start a new worker per session")
        env = self.probe(job)
        check_hardware(env["device"], job["precision"])
        path, seconds, cached, kwargs, wanted, memory = compile_popef(job, env)
        self.job, self.pack = job, job.get("pack") if job.get("pack_inputs") is not None else None
        started = time.perf_counter()
        self.runner = runtime.Runner(path, runtime_config(self.pack))
        attach = time.perf_counter() - started
        info = {"popef": path, "compile_seconds": seconds, "popef_cached": cached,
                "attach_seconds": attach, "converter_options": kwargs, "compiler_options": wanted,
                "inputs": describe(self.runner.get_execute_inputs()),
                "outputs": describe(self.runner.get_execute_outputs()), "env": env,
                "pack": self.pack is not None, "memory": memory, "graph": read_graph_record(path)}
        if job["precision"] == "fp8":
            info["fp8_op_types"] = list(FP8_OPS)  # what PopRT converts to fp8; the rest stays fp16
        return info

    def stage(self, inputs):
        """Inputs cast once to the dtypes the compiled model takes (fp16, int32...)."""
        feeds = {}
        for info in self.runner.get_execute_inputs():
            if info.name not in inputs:
                raise KeyError(f"the compiled model takes input {info.name!r}; got {sorted(inputs)}")
            array = np.ascontiguousarray(inputs[info.name], dtype=info.numpy_data_type())
            if list(array.shape) != list(info.shape):
                raise ValueError(f"input {info.name!r} has shape {list(array.shape)}, the compiled model takes {list(info.shape)}")
            feeds[info.name] = array
        return feeds

    def new_outputs(self):
        return {o.name: np.zeros(o.shape, dtype=o.numpy_data_type()) for o in self.runner.get_execute_outputs()}

    def run(self, msg):
        self._require_runner()
        if self.pack:
            return self.run_packed(msg["inputs"], bool(msg.get("isolate")))
        outputs = self.new_outputs()
        self.runner.execute(self.stage(msg["inputs"]), outputs)
        return [outputs[o.name] for o in self.runner.get_execute_outputs()]

    def measure(self, msg):
        self._require_runner()
        calls = self.time_packed(msg) if self.pack else self.time_batches(msg)
        return calls

    def close(self, _msg):
        self.runner = None
        return None

    def _require_runner(self):
        if self.runner is None:
            raise RuntimeError("no model loaded in this worker (send 'load' first)")

    # -- timed calls: warm-up, then every client on the one Runner, power over exactly those calls
    def time_batches(self, msg):
        feeds = self.stage(msg["inputs"])
        outputs = self.new_outputs()
        for _ in range(int(msg.get("warmup", 0))):
            self.runner.execute(feeds, outputs)

        def call(state):
            self.runner.execute(feeds, state)

        return run_clients(call, self.new_outputs, int(msg.get("clients", 1)), msg)

    # -- pack mode (ByteMLPerf's runtime_backend_ipu.py / engine_poprt.py benchmark_pack)
    def sample_feeds(self, row):
        """One sample of a padded batch for the PackRunner: the padded row (the runner removes the
        padding by the mask) plus its per-sample position_ids, so that its outputs are right."""
        pack, extra = self.pack, self.job.get("pack_inputs") or {}
        feeds = {name: np.ascontiguousarray(row[name], dtype=np.int32) for name in pack["input_names"]}
        length = int(np.count_nonzero(feeds[pack["mask_name"]]))
        if extra.get("add") == "position_ids":
            offset = int(extra.get("position_offset", 0)) + int(extra.get("padding_idx", 0))
            feeds["position_ids"] = np.arange(length, dtype=np.int32) + offset
        return feeds

    def sample_outputs(self):
        """One sample's output buffers, sized as ByteMLPerf does: the model's outputs with dim 0 = 1."""
        outs = {}
        for o in model_outputs(self.runner):
            shape = list(o.shape)
            shape[0] = 1
            outs[o.name] = np.zeros(shape, dtype=o.numpy_data_type())
        return outs

    def run_packed(self, inputs, isolate=False):
        """A padded batch, sent sample by sample: asynchronously, so that they pack together, or
        with `isolate` one at a time, each waiting for its own execution (alone in its pack after
        the runner's timeout), so that no sample can share a row with another."""
        n = len(inputs[self.pack["mask_name"]])
        pending = []
        for i in range(n):
            row = {name: np.asarray(inputs[name])[i] for name in self.pack["input_names"]}
            outs = self.sample_outputs()
            future = execute_async(self.runner, self.sample_feeds(row), outs)
            if isolate:
                future.wait()
                future = None
            pending.append((future, outs))
        results = []
        for future, outs in pending:
            if future is not None:
                future.wait()
            results.append(outs)
        return [np.concatenate([r[o.name] for r in results]) for o in model_outputs(self.runner)]

    def time_packed(self, msg):
        """ByteMLPerf's benchmark_pack: int(pack batch x 3.5) clients send single samples drawn from
        a set of pack batch x 100 lengths ~ normal(avg, avg) truncated and clipped to [1, max]
        (stratified: see pack_lengths), each
        sample unpadded all-ones arrays of its length for the pack inputs (no position_ids, as
        benchmark_pack); warm-up outside the window."""
        bench = self.pack["benchmark"]
        seq = int(self.runner_input(self.pack["mask_name"]).shape[-1])
        top = min(int(bench["max_valid_seq"]), seq)
        rng = np.random.RandomState(int(msg.get("seed", 0)))
        count = max(int(msg.get("pack_samples") or 0), PACK_SAMPLES_PER_ROW * int(self.pack["batch_size"]))
        lengths = pack_lengths(rng, float(bench["avg_len"]), top, count)
        dataset = [{name: np.ones(int(n), dtype=np.int32) for name in self.pack["input_names"]} for n in lengths]
        outputs = self.sample_outputs()
        for i in range(int(msg.get("warmup", 0))):
            self.runner.execute(dataset[i % len(dataset)], outputs)
        pick = random.Random(int(msg.get("seed", 0)))

        def call(state):
            self.runner.execute(dataset[pick.randrange(len(dataset))], state)

        clients = int(int(self.pack["batch_size"]) * float(bench["clients_per_pack_row"]))
        out = run_clients(call, self.sample_outputs, clients, msg)
        avg = float(bench["avg_len"])
        out["pack_lengths"] = {"count": int(count), "mean": float(lengths.mean()),
                               "population_mean": population_mean(avg, avg, top),
                               "population": f"normal({avg:g}, {avg:g}) truncated to int, clipped to [1, {top}]",
                               "draw": "stratified over the population's quantiles, shuffled",
                               "position_ids": "not sent (as benchmark_pack)"}
        return out

    def runner_input(self, name):
        return next(i for i in self.runner.get_execute_inputs() if i.name == name)


def execute_async(runner, feeds, outputs):
    """PopRT 1.3 and later spell it execute_async; 1.1 / 1.2 (and ByteMLPerf) executeAsync."""
    for name in ("execute_async", "executeAsync"):
        method = getattr(runner, name, None)
        if method is not None:
            return method(feeds, outputs)
    raise AttributeError("this PopRT Runner has neither execute_async nor executeAsync")


def model_outputs(runner):
    """The model's outputs as ByteMLPerf sizes pack buffers (get_model_outputs), else the newer name."""
    method = getattr(runner, "get_model_outputs", None) or runner.get_execute_outputs
    return method()


def length_pmf(avg, sd, top):
    """P(length = k) for k = 1..top, length = clip(int(x), 1, top), x ~ normal(avg, sd): the
    population benchmark_pack draws its samples' lengths from (int() truncates toward zero)."""
    import math

    def cdf(x):
        return 0.5 * (1.0 + math.erf((x - avg) / (sd * math.sqrt(2.0))))

    edges = [cdf(float(k)) for k in range(2, top + 1)]  # int(x) <= 1 (x < 2) is length 1; >= top is top
    pmf = np.diff(np.array([0.0] + edges + [1.0]))
    return pmf


def population_mean(avg, sd, top):
    pmf = length_pmf(avg, sd, top)
    return float(np.dot(np.arange(1, top + 1), pmf))


def pack_lengths(rng, avg, top, count):
    """`count` lengths from benchmark_pack's population, stratified (one uniform draw in each of
    `count` equal slices of probability, then shuffled): each is a draw from the population, and
    their mean is the population's to well within 1 % (independent draws, as ByteMLPerf's, miss it
    by about 1 % at 4000 samples)."""
    cum = np.cumsum(length_pmf(avg, avg, top))
    u = (np.arange(count) + rng.uniform(size=count)) / count
    lengths = np.minimum(np.searchsorted(cum, u * cum[-1], side="right") + 1, top).astype(np.int32)
    rng.shuffle(lengths)
    return lengths


def describe(infos):
    return [{"name": i.name, "shape": list(i.shape), "dtype": np.dtype(i.numpy_data_type()).name}
            for i in infos]


# --- timing and power --------------------------------------------------------------------------------

def run_clients(call, new_state, clients, msg):
    """`clients` threads, released together, each timing synchronous calls until the minimum
    duration AND count (or the maximum duration); power read from just before the release to the
    end of the last call (the client that ends last takes the closing reading itself: waiting for the
    threads to join first lagged the window's end 22 ms behind the calls on a busy 2-core host)."""
    barrier = threading.Barrier(clients + 1)
    results = [None] * clients
    sampler = PowerSampler(msg.get("power"))
    running, running_lock = [clients], threading.Lock()
    min_s, max_s = float(msg.get("min_duration_s", 1.0)), float(msg.get("max_duration_s", 600.0))
    min_count = int(msg.get("min_count", 10))

    def client(index):
        try:
            state = new_state()
            clock = time.perf_counter_ns
            times = []
            append = times.append
            barrier.wait()
            t_begin = clock()
            min_end, max_end = t_begin + int(min_s * 1e9), t_begin + int(max_s * 1e9)
            n = 0
            while True:
                t0 = clock()
                call(state)
                t1 = clock()
                append((t0, t1))
                n += 1
                if (n >= min_count and t1 >= min_end) or t1 >= max_end:
                    break
            results[index] = times
            with running_lock:
                running[0] -= 1
                last = running[0] == 0
            if last:
                sampler.close()
        except BaseException as exc:  # noqa: BLE001 - reported below
            barrier.abort()
            results[index] = exc

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)]
    for t in threads:
        t.start()
    sampler.start()
    try:
        barrier.wait()
    except threading.BrokenBarrierError:
        pass
    for t in threads:
        t.join()
    power = sampler.stop()
    errors = [r for r in results if isinstance(r, BaseException)]
    real = [e for e in errors if not isinstance(e, threading.BrokenBarrierError)]
    if errors:
        raise (real or errors)[0]
    return {"calls": results, "clients": clients, "power": power}


class PowerSampler:
    """Reads the IPU sensors in a thread at `hz` and returns the raw readings; the kit parses them
    (kit.measure.power.ipu), so the rules live in one place. Sources: 'gcipuinfo' (entries converted with
    dict()), 'gc-monitor' (its table, as text) or 'gc-info' (`gc-info -d N -i`, as text)."""

    def __init__(self, options):
        self.options = options or None
        self.readings, self.errors = [], []
        self._stop = threading.Event()
        self._thread = None
        self._read = None
        self.source = None
        self._closed_ns = None

    def start(self):
        if not self.options:
            return
        for source in self.options.get("sources", ("gcipuinfo", "gc-monitor", "gc-info")):
            try:
                self._read = self._reader(source)
                self._read()
            except Exception as exc:  # noqa: BLE001 - the kit reports why power is unavailable
                self.errors.append(f"{source}: {type(exc).__name__}: {exc}")
                self._read = None
                continue
            self.source = source
            break
        if self._read is None:
            return
        self._sample()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def close(self):
        """End the window now with a closing reading; a reading the thread starts later is dropped."""
        if self._thread is None or self._closed_ns is not None:
            return
        self._stop.set()
        self._closed_ns = self._sample()

    def stop(self):
        if not self.options:
            return None
        if self._thread is not None:
            self.close()
            self._thread.join()
            self.readings = sorted(r for r in self.readings if r[0] <= self._closed_ns)
        return {"source": self.source, "readings": self.readings, "errors": self.errors,
                "hz_requested": float(self.options.get("hz", 20.0)),
                "gcda_monitor": os.environ.get("GCDA_MONITOR")}

    def _loop(self):
        period = 1.0 / float(self.options.get("hz", 20.0))
        while not self._stop.wait(period):
            self._sample()

    def _sample(self):
        t = time.perf_counter_ns()
        try:
            self.readings.append((t, self._read()))
        except Exception as exc:  # noqa: BLE001
            self.errors.append(f"{type(exc).__name__}: {exc}")
        return t

    def _reader(self, source):
        timeout = float(self.options.get("command_timeout_s", 5.0))
        if source == "gcipuinfo":
            import gcipuinfo

            info = gcipuinfo.gcipuinfo()
            info.setUpdateMode(True)
            return lambda: [dict(d) for d in info.getDevices()]
        if source == "gc-monitor":
            return lambda: _command(["gc-monitor"], timeout)
        if source == "gc-info":
            ids = self.options.get("devices") or [0]
            return lambda: [_command(["gc-info", "-d", str(i), "-i"], timeout) for i in ids]
        raise ValueError(f"unknown power source {source!r}; known: gcipuinfo, gc-monitor, gc-info")


def _command(argv, timeout):
    done = subprocess.run(argv, capture_output=True, timeout=timeout, text=True)
    if done.returncode != 0:
        command = " ".join(argv)
        raise RuntimeError(f"{command} exited {done.returncode}: {done.stderr.strip()[:200]}")
    return done.stdout


# --- the loop ------------------------------------------------------------------------------------------

OPS = {"probe": Session.probe, "load": Session.load, "run": Session.run, "measure": Session.measure,
       "close": Session.close}


def serve(requests, replies):
    session = Session()
    while True:
        try:
            msg = read_message(requests)
        except EOFError:
            return 0
        op = msg.get("op")
        try:
            if op not in OPS:
                raise ValueError(f"unknown op {op!r}; known: {sorted(OPS)}")
            reply = {"ok": True, "result": OPS[op](session, msg)}
        except Exception as exc:  # noqa: BLE001 - the kit raises it with this message
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}",
                     "traceback": traceback.format_exc(limit=8)}
        write_message(replies, reply)
        if op == "close":
            return 0


def main(argv):
    if len(argv) != 2 or argv[1] != "--serve":
        sys.stderr.write(__doc__)
        return 2
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything PopRT prints goes to stderr, never into the reply stream
    requests = os.fdopen(os.dup(0), "rb")
    return serve(requests, replies)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
