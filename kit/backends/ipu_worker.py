"""The kit's PopRT worker: compile an ONNX model for the IPU, run it, time it, report JSON.

PopRT only supports Python 3.8 (Poplar SDK / graphcorecn/poprt image), so this file runs apart
from the kit, under that interpreter. It must stay Python-3.8 compatible and import only the
standard library, numpy, onnx and poprt.

    python3 ipu_worker.py JOB.json [RESULT.json]     (JOB "-" reads stdin; no RESULT: stdout)

A job is a JSON object:
    mode            "run" (default) or "probe" (versions and device only)
    onnx_path       the exported fp32 ONNX model
    precision       "fp32", "fp16" or "fp8"
    fp8_params      for fp8, e.g. "F143,F143,-3,-3" (ByteMLPerf's published setting)
    batch_sizes     e.g. [4, 32]
    inputs          [{name, shape (at batch 1), dtype, batched, low, high}]
    inputs_npz      optional {batch_size: path of an .npz with the inputs}; else seeded random
    seed            for generated inputs (default 0)
    converter_options, compiler_options   extra poprt options (see COMPILER_OPTIONS)
    clients, warmup, min_duration_s, min_count, max_duration_s   the timing loop
    measure         time the calls (default true); false compiles and (optionally) runs once
    return_outputs  return outputs of one execute on the inputs (base64 .npy), for numerics
    cache_dir       where compiled PopEF files are kept, keyed by model hash + options

The result has per batch size the (start_ns, end_ns) of every call of every client thread
(time.perf_counter_ns), the outputs, compile seconds, and an error string when that batch size
failed (the others still run).
"""

import base64
import hashlib
import io
import json
import os
import platform
import sys
import threading
import time
import traceback

import numpy as np

WORKER_VERSION = 1
COMPILER_OPTIONS = ("batches_per_step", "num_io_tiles", "available_memory_proportion",
                    "partials_type", "stream_buffering_depth", "ipu_version", "num_ipus",
                    "enable_prefetch_datastreams", "rearrange_anchors_on_host",
                    "use_128bit_conv_unit_load", "enable_fast_reduce", "group_host_sync",
                    "enable_outlining", "outline_threshold")
FP8_OPS = ("Conv", "MatMul", "Gemm")
TEST_DOUBLE_NOTE = "not run on an IPU: PopRT test double over ONNX Runtime"


def load_job(argv):
    if len(argv) < 2 or argv[1] == "-":
        return json.load(sys.stdin)
    with open(argv[1]) as f:
        return json.load(f)


def environment():
    """Versions and the device as PopRT reports them; device errors are reported, not raised."""
    import poprt
    from poprt import runtime

    info = {"worker_version": WORKER_VERSION, "python": platform.python_version(),
            "numpy": np.__version__, "poprt_version": getattr(poprt, "__version__", "unknown"),
            "test_double": bool(getattr(poprt, "__kit_test_double__", False))}
    if info["test_double"]:
        info["note"] = TEST_DOUBLE_NOTE
    try:
        manager = runtime.DeviceManager()
        info["device"] = {"ipu_version": manager.ipu_hardware_version(),
                          "num_devices": int(manager.get_num_devices())}
    except Exception as exc:  # noqa: BLE001 - no IPU attached, driver missing...
        info["device"] = {"error": f"{type(exc).__name__}: {exc}"}
    return info


def batched_shape(spec, batch_size):
    shape = list(spec["shape"])
    if spec.get("batched", True):
        shape[0] = shape[0] * batch_size
    return shape


def generate_inputs(specs, batch_size, seed):
    rng = np.random.default_rng(seed)
    out = {}
    for spec in specs:
        shape = batched_shape(spec, batch_size)
        low, high = spec.get("low", 0.0), spec.get("high", 1.0)
        if spec["dtype"] == "bool":
            out[spec["name"]] = rng.random(shape) < high
        elif spec["dtype"].startswith("int"):
            out[spec["name"]] = rng.integers(int(low), int(high), size=shape, dtype=spec["dtype"])
        else:
            out[spec["name"]] = rng.uniform(low, high, size=shape).astype(spec["dtype"])
    return out


def load_inputs(job, batch_size):
    paths = job.get("inputs_npz") or {}
    path = paths.get(str(batch_size))
    if path is None:
        return generate_inputs(job["inputs"], batch_size, job.get("seed", 0))
    with np.load(path) as data:
        return {name: data[name] for name in data.files}


def converter_kwargs(job, batch_size):
    kwargs = {"input_shape": {s["name"]: batched_shape(s, batch_size) for s in job["inputs"]},
              "precision": job["precision"]}
    if job["precision"] == "fp8":
        kwargs["fp8_params"] = job.get("fp8_params") or "F143,F143,-3,-3"
    kwargs.update(job.get("converter_options") or {})
    return kwargs


def compiler_options(job, ipu_version):
    from poprt.compiler import CompilerOptions

    wanted = dict(job.get("compiler_options") or {})
    unknown = sorted(set(wanted) - set(COMPILER_OPTIONS))
    if unknown:
        raise ValueError(f"unknown compiler option(s) {unknown}; known: {list(COMPILER_OPTIONS)}")
    if not wanted.get("ipu_version") and ipu_version:
        wanted["ipu_version"] = ipu_version
    opts = CompilerOptions()
    for name, value in sorted(wanted.items()):
        setattr(opts, name, value)
    return opts, wanted


def popef_path(job, batch_size, kwargs, options, poprt_version):
    """Cache key: model bytes + precision + every option + the PopRT version."""
    digest = hashlib.sha1()
    with open(job["onnx_path"], "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    key = json.dumps({"converter": kwargs, "compiler": options, "bs": batch_size,
                      "poprt": poprt_version, "worker": WORKER_VERSION}, sort_keys=True)
    digest.update(key.encode())
    stem = os.path.splitext(os.path.basename(job["onnx_path"]))[0]
    name = f"{stem}-{job['precision']}-bs{batch_size}-{digest.hexdigest()[:16]}.popef"
    return os.path.join(job["cache_dir"], name)


def compile_popef(job, batch_size, env):
    """Convert + compile_and_export once per key; returns (path, compile seconds, cached)."""
    import onnx
    from poprt.compiler import Compiler
    from poprt.converter import Converter

    kwargs = converter_kwargs(job, batch_size)
    opts, wanted = compiler_options(job, env.get("device", {}).get("ipu_version"))
    path = popef_path(job, batch_size, kwargs, wanted, env["poprt_version"])
    if os.path.exists(path):
        return path, 0.0, True, kwargs, wanted
    os.makedirs(job["cache_dir"], exist_ok=True)
    started = time.perf_counter()
    converted = Converter(**kwargs).convert(onnx.load(job["onnx_path"]))
    outputs = [o.name for o in converted.graph.output]
    tmp = f"{path}.{os.getpid()}.tmp"
    Compiler.compile_and_export(converted.SerializeToString(), outputs, tmp, opts)
    os.replace(tmp, path)
    return path, time.perf_counter() - started, False, kwargs, wanted


def stage_io(runner, inputs):
    """Inputs cast once to the dtypes the compiled model takes (fp16, int32...), outside timing."""
    feeds = {}
    for info in runner.get_execute_inputs():
        if info.name not in inputs:
            raise KeyError(f"the compiled model takes input {info.name!r}; the job has {sorted(inputs)}")
        array = np.ascontiguousarray(inputs[info.name], dtype=info.numpy_data_type())
        if list(array.shape) != list(info.shape):
            raise ValueError(f"input {info.name!r} has shape {list(array.shape)}, "
                             f"the compiled model takes {list(info.shape)}")
        feeds[info.name] = array
    return feeds


def new_outputs(runner):
    return {o.name: np.zeros(o.shape, dtype=o.numpy_data_type()) for o in runner.get_execute_outputs()}


def time_client(runner, feeds, job, barrier, results, index):
    """One client: synchronous execute calls until min duration AND min count (or max duration)."""
    try:
        outputs = new_outputs(runner)
        execute = runner.execute
        clock = time.perf_counter_ns
        barrier.wait()
        times = []
        append = times.append
        t_begin = clock()
        min_end = t_begin + int(job.get("min_duration_s", 1.0) * 1e9)
        max_end = t_begin + int(job.get("max_duration_s", 600.0) * 1e9)
        min_count = int(job.get("min_count", 10))
        n = 0
        while True:
            t0 = clock()
            execute(feeds, outputs)
            t1 = clock()
            append((t0, t1))
            n += 1
            if (n >= min_count and t1 >= min_end) or t1 >= max_end:
                break
        results[index] = times
    except BaseException as exc:  # noqa: BLE001 - reported by the caller
        barrier.abort()
        results[index] = exc


def measure(runner, feeds, job):
    clients = int(job.get("clients", 1))
    barrier = threading.Barrier(clients)
    results = [None] * clients
    threads = [threading.Thread(target=time_client, args=(runner, feeds, job, barrier, results, i))
               for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r in results:
        if isinstance(r, BaseException) and not isinstance(r, threading.BrokenBarrierError):
            raise r
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return [[[s, e] for s, e in thread] for thread in results]


def encode_array(array):
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(array), allow_pickle=False)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def run_batch(job, batch_size, env):
    from poprt import runtime

    result = {"batch_size": batch_size, "error": None}
    path, seconds, cached, kwargs, wanted = compile_popef(job, batch_size, env)
    result.update({"popef": path, "compile_seconds": seconds, "popef_cached": cached,
                   "converter_options": kwargs, "compiler_options": wanted})
    if job["precision"] == "fp8":
        result["fp8_op_types"] = list(FP8_OPS)  # what PopRT converts to fp8; the rest stays fp16
    if not job.get("measure", True) and not job.get("return_outputs", False):
        return result
    config = runtime.RuntimeConfig()
    config.timeout_ns = 0
    runner = runtime.Runner(path, config)
    feeds = stage_io(runner, load_inputs(job, batch_size))
    result["input_dtypes"] = {k: str(v.dtype) for k, v in feeds.items()}
    outputs = new_outputs(runner)
    for _ in range(int(job.get("warmup", 5))):
        runner.execute(feeds, outputs)
    if job.get("return_outputs", False):
        runner.execute(feeds, outputs)
        names = [o.name for o in runner.get_execute_outputs()]
        result["outputs"] = [{"name": n, "npy_b64": encode_array(outputs[n])} for n in names]
    if job.get("measure", True):
        result["clients"] = int(job.get("clients", 1))
        result["calls"] = measure(runner, feeds, job)
    return result


def run_job(job):
    env = environment()
    if job.get("mode") == "probe":
        return env
    if job.get("precision") not in ("fp32", "fp16", "fp8"):
        raise ValueError(f"precision must be fp32, fp16 or fp8, got {job.get('precision')!r}")
    batches = []
    for batch_size in job["batch_sizes"]:
        try:
            batches.append(run_batch(job, int(batch_size), env))
        except Exception as exc:  # noqa: BLE001 - one failing batch size must not lose the others
            batches.append({"batch_size": int(batch_size),
                            "error": f"{type(exc).__name__}: {exc}",
                            "traceback": traceback.format_exc(limit=6)})
    env["precision"] = job["precision"]
    env["batches"] = batches
    return env


def main(argv):
    try:
        result = run_job(load_job(argv))
    except Exception as exc:  # noqa: BLE001 - the kit reads the reason from the JSON
        result = {"worker_version": WORKER_VERSION, "fatal": f"{type(exc).__name__}: {exc}",
                  "traceback": traceback.format_exc(limit=6)}
    text = json.dumps(result)
    if len(argv) >= 3:
        tmp = argv[2] + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, argv[2])
    else:
        sys.stdout.write(text + "\n")
    return 1 if "fatal" in result else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
