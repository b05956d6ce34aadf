"""The Runner a worker holds and the requests it serves on it."""

import random
import time

import numpy as np

from . import convert
from .device import FP8_OPS, check_hardware, environment, name_device, poprt_release
from .packing import (
    execute_async,
    pack_fill,
    pack_lengths,
    population_mean,
    sample_output_specs,
)
from .timing import time_clients

PACK_SAMPLES_PER_ROW = 100  # benchmark_pack draws iterations (100) x pack batch sample lengths


def runtime_config(pack):
    """RuntimeConfig with PopRT's defaults (timeout_ns stays 10 ms), or ByteMLPerf's
    PackRunnerConfig."""
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
        pack["mask_name"], [n for n in pack["input_names"] if n != pack["mask_name"]]
    )
    return config


class RunnerHost:
    """The Runner and what was staged for it; one per worker process."""

    def __init__(self):
        self.env = None
        self.runner = None
        self.job = None
        self.pack = None
        self.release = None  # (major, minor) of the PopRT that runs: which documented calls to make
        self.device = None  # the IPU named in the runtime config, kept while its Runner lives
        self.compiled_shapes = None  # the converter's input_shape: what was compiled
        self.sample_specs = None  # pack mode: one sample's output buffers

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
        self.release = poprt_release(env["poprt_version"])
        path, seconds, cached, kwargs, wanted, memory = convert.compile_popef(job, env)
        self.job, self.pack = job, job.get("pack") if job.get("pack_inputs") is not None else None
        self.compiled_shapes = kwargs["input_shape"]
        started = time.perf_counter()
        config = runtime_config(self.pack)
        device_id, self.device = name_device(runtime, config, env["device"], self.release)
        self.runner = runtime.Runner(path, config)
        attach = time.perf_counter() - started
        info = {
            "popef": path,
            "compile_seconds": seconds,
            "popef_cached": cached,
            "attach_seconds": attach,
            "converter_options": kwargs,
            "compiler_options": wanted,
            "inputs": describe(self.runner.get_execute_inputs()),
            "outputs": describe(self.runner.get_execute_outputs()),
            "env": env,
            "compiled_batch_size": int(job["batch_size"]),
            "pack": self.pack is not None,
            "memory": memory,
            "device_id": device_id,
            "graph": convert.read_graph_record(path),
        }
        if self.pack:
            self.sample_specs, info["pack_output_calls"] = sample_output_specs(
                self.runner, self.release, int(job["batch_size"])
            )
        if job["precision"] == "fp8":
            info["fp8_op_types"] = list(FP8_OPS)  # what PopRT converts to fp8; the rest stays fp16
        return info

    def stage(self, inputs):
        """Inputs cast once to the dtypes the compiled model takes (fp16, int32...)."""
        feeds = {}
        for info in self.runner.get_execute_inputs():
            if info.name not in inputs:
                raise KeyError(
                    f"the compiled model takes input {info.name!r}; got {sorted(inputs)}"
                )
            array = np.ascontiguousarray(inputs[info.name], dtype=info.numpy_data_type())
            if list(array.shape) != list(info.shape):
                raise ValueError(
                    f"input {info.name!r} has shape {list(array.shape)}, the compiled model takes "
                    f"{list(info.shape)}"
                )
            feeds[info.name] = array
        return feeds

    def new_outputs(self):
        return {
            o.name: np.zeros(o.shape, dtype=o.numpy_data_type())
            for o in self.runner.get_execute_outputs()
        }

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
        self.runner = self.device = None
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

        return time_clients(call, self.new_outputs, int(msg.get("clients", 1)), msg)

    # -- pack mode (ByteMLPerf's runtime_backend_ipu.py / engine_poprt.py benchmark_pack)
    def sample_feeds(self, row):
        """One sample of a padded batch for the PackRunner: the padded row (the runner removes the
        padding by the mask) plus its per-sample position_ids, so that its outputs are right."""
        pack, extra = self.pack, self.job.get("pack_inputs") or {}
        feeds = {
            name: np.ascontiguousarray(row[name], dtype=np.int32) for name in pack["input_names"]
        }
        length = int(np.count_nonzero(feeds[pack["mask_name"]]))
        if extra.get("add") == "position_ids":
            offset = int(extra.get("position_offset", 0)) + int(extra.get("padding_idx", 0))
            feeds["position_ids"] = np.arange(length, dtype=np.int32) + offset
        return feeds

    def sample_outputs(self):
        """One sample's output buffers (sample_output_specs: by the calls this PopRT documents)."""
        return {name: np.zeros(shape, dtype=dtype) for name, shape, dtype in self.sample_specs}

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
        return [np.concatenate([r[name] for r in results]) for name, _, _ in self.sample_specs]

    def time_packed(self, msg):
        """ByteMLPerf's benchmark_pack: int(pack batch x 3.5) clients send single samples drawn from
        a set of pack batch x 100 lengths ~ normal(avg, avg) truncated and clipped to [1, max]
        (stratified: see pack_lengths), each
        sample unpadded all-ones arrays of its length for the pack inputs (no position_ids, as
        benchmark_pack; an input that cannot hold 1 gets its lowest valid value: pack_fill);
        warm-up outside the window."""
        bench = self.pack["benchmark"]
        seq = int(self.compiled_shapes[self.pack["mask_name"]][-1])
        top = min(int(bench["max_valid_seq"]), seq)
        rng = np.random.RandomState(int(msg.get("seed", 0)))
        count = max(
            int(msg.get("pack_samples") or 0), PACK_SAMPLES_PER_ROW * int(self.pack["batch_size"])
        )
        lengths = pack_lengths(rng, float(bench["avg_len"]), top, count)
        fill = pack_fill(self.job.get("inputs", []), self.pack["input_names"])
        dataset = [
            {name: np.full(int(n), fill[name], dtype=np.int32) for name in self.pack["input_names"]}
            for n in lengths
        ]
        outputs = self.sample_outputs()
        for i in range(int(msg.get("warmup", 0))):
            self.runner.execute(dataset[i % len(dataset)], outputs)
        pick = random.Random(int(msg.get("seed", 0)))

        def call(state):
            self.runner.execute(dataset[pick.randrange(len(dataset))], state)

        clients = int(int(self.pack["batch_size"]) * float(bench["clients_per_pack_row"]))
        out = time_clients(call, self.sample_outputs, clients, msg)
        avg = float(bench["avg_len"])
        out["pack_fill"] = {name: value for name, value in fill.items() if value != 1}
        out["pack_lengths"] = {
            "count": int(count),
            "mean": float(lengths.mean()),
            "population_mean": population_mean(avg, avg, top),
            "population": f"normal({avg:g}, {avg:g}) truncated to int, clipped to [1, {top}]",
            "draw": "stratified over the population's quantiles, shuffled",
            "position_ids": "not sent (as benchmark_pack)",
        }
        return out


def describe(infos):
    return [
        {"name": i.name, "shape": list(i.shape), "dtype": np.dtype(i.numpy_data_type()).name}
        for i in infos
    ]
