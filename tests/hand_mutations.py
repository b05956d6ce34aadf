"""The mutations of issue 33's table, made by hand one at a time in a scratch copy of the checkout,
each against the tests that cover figures (mutmut's test selection in pyproject.toml): which test
fails first. A mutation no test kills exits 1.

    python -m tests.hand_mutations            # all; prints a Markdown table
    python -m tests.hand_mutations 3 11       # by number

`--gpu` runs the second list instead, GPU_MUTATIONS (issue 43: the GPU candidates, the clients
option, the per-batch GPU search, the CUDA-graph capture and its copies, ONNX Runtime's CUDA and
TensorRT providers, TensorRT's own API, the GPU peer arms and the GPU roofline), against GPU_TESTS:
the tests that run the GPU paths through the doubles (tests/cuda_double.py,
tests/tensorrt_double.py, tests/gpu_fakes.py and the fake ONNX Runtime GPU session), without a GPU.
Its numbers are its own:

    python -m tests.hand_mutations --gpu      # all of GPU_MUTATIONS
    python -m tests.hand_mutations --gpu 3 5  # by number in GPU_MUTATIONS

Not part of `make test` (each mutation runs the selected tests once: about 10-40 s).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class HandMutation:
    area: str
    what: str
    path: str
    old: str
    new: str


MUTATIONS = [
    HandMutation(
        "scorecard",
        "best QPS taken as the minimum",
        "kit/publish/scorecard.py",
        "m = max(measurements, key=lambda x: x.qps_bytemlperf or 0)",
        "m = min(measurements, key=lambda x: x.qps_bytemlperf or 0)",
    ),
    HandMutation(
        "scorecard",
        "AVG Latency read from the median (p50)",
        "kit/measure/bytemlperf.py",
        '"avg_latency_ms": sum(durations) / n',
        '"avg_latency_ms": durations[n // 2]',
    ),
    HandMutation(
        "scorecard",
        "P99 from numpy's interpolated p99 instead of ByteMLPerf's sorted[int(0.99 n)]",
        "kit/measure/bytemlperf.py",
        '"p99_latency_ms": durations[int(0.99 * n)]',
        '"p99_latency_ms": float(__import__("numpy").percentile(durations, 99))',
    ),
    HandMutation(
        "scorecard",
        "C2 throughput from the wall-clock throughput",
        "kit/studies/c2.py",
        '"throughput": throughput,',
        '"throughput": m.throughput,',
    ),
    HandMutation(
        "scorecard",
        "the oldest result chosen",
        "kit/publish/scorecard.py",
        "return max(hits, key=lambda pr: pr[1].created_at)",
        "return min(hits, key=lambda pr: pr[1].created_at)",
    ),
    HandMutation(
        "scorecard",
        "the replicas multiplier dropped (C2: micro batch for the batch)",
        "kit/studies/c2.py",
        "throughput = batch / (latency_ms / 1000.0)",
        "throughput = micro / (latency_ms / 1000.0)",
    ),
    HandMutation(
        "scorecard",
        "the interval not passed to the verdict",
        "kit/publish/scorecard.py",
        "interval=interval,",
        "interval=None,",
    ),
    HandMutation(
        "C2 efficiency",
        "efficiency inverted (W per image/s)",
        "kit/studies/c2.py",
        'row["efficiency"] = throughput / power["mean_w"]',
        'row["efficiency"] = power["mean_w"] / throughput',
    ),
    HandMutation(
        "C2 efficiency",
        "wall-clock throughput per watt",
        "kit/studies/c2.py",
        'row["efficiency"] = throughput / power["mean_w"]',
        'row["efficiency"] = m.throughput / power["mean_w"]',
    ),
    HandMutation(
        "C2 efficiency",
        "per-watt from a plain sample mean",
        "kit/measure/power/summary.py",
        "mean_w=energy / duration,",
        "mean_w=sum(w) / len(w),",
    ),
    HandMutation(
        "intervals",
        "t quantile with k instead of k - 1 degrees of freedom",
        "kit/measure/stats.py",
        "half = student_t.ppf(0.5 + level / 2, k - 1) * se",
        "half = student_t.ppf(0.5 + level / 2, k) * se",
    ),
    HandMutation(
        "intervals",
        "wrong residuals (a - b for a - r b)",
        "kit/measure/stats.py",
        "resid = a - value * b",
        "resid = a - b",
    ),
    HandMutation(
        "intervals",
        "order statistic off by one",
        "kit/measure/stats.py",
        "idx = math.floor(pos) - 1 if floor else math.ceil(pos)",
        "idx = math.floor(pos) if floor else math.ceil(pos)",
    ),
    HandMutation(
        "latency statistics",
        "p90 computed at 95",
        "kit/measure/stats.py",
        "np.percentile(ms, [50, 90, 99])",
        "np.percentile(ms, [50, 95, 99])",
    ),
    HandMutation(
        "latency statistics",
        "std with ddof=1",
        "kit/measure/stats.py",
        "std_ms=float(ms.std()),",
        "std_ms=float(ms.std(ddof=1)),",
    ),
    HandMutation(
        "verdict",
        "<= made < at the 10 % tolerance (figure)",
        "kit/publish/compare.py",
        "ok = abs(measured - published) <= THROUGHPUT_TOLERANCE * abs(published)",
        "ok = abs(measured - published) < THROUGHPUT_TOLERANCE * abs(published)",
    ),
    HandMutation(
        "verdict",
        "<= made < at the 10 % tolerance (interval)",
        "kit/publish/compare.py",
        "ok = max(lo - published, published - hi) <= THROUGHPUT_TOLERANCE * abs(published)",
        "ok = max(lo - published, published - hi) < THROUGHPUT_TOLERANCE * abs(published)",
    ),
    HandMutation(
        "verdict",
        "diff tolerance doubled",
        "kit/publish/compare.py",
        "DIFF_TOLERANCE = 0.10",
        "DIFF_TOLERANCE = 0.20",
    ),
    HandMutation(
        "ByteMLPerf QPS",
        "trim slice off by one",
        "kit/measure/bytemlperf.py",
        "(trim, len(t) - trim) for t in calls",
        "(trim, len(t) - trim + 1) for t in calls",
    ),
    HandMutation(
        "ByteMLPerf QPS",
        "trim 20 made 10",
        "kit/measure/bytemlperf.py",
        "BYTEMLPERF_TRIM = 20",
        "BYTEMLPERF_TRIM = 10",
    ),
    HandMutation(
        "ByteMLPerf QPS",
        "QPS over every call's window instead of the kept calls'",
        "kit/measure/bytemlperf.py",
        "first = min(t[0][0] for t in kept if t)",
        "first = min(t[0][0] for t in calls if t)",
    ),
    HandMutation(
        "published readers",
        "the headline metric value taking the QPS number",
        "kit/published/figures.py",
        '"metric_value": met["number"]',
        '"metric_value": qps["number"]',
    ),
    # issue 45: the four that survived a hand-made probe of 45
    HandMutation(
        "C2 efficiency",
        "samples/s/W from the plain sample mean",
        "kit/measure/power/summary.py",
        "self.samples_per_s_per_w = self.samples_per_s / self.mean_w\n",
        "self.samples_per_s_per_w = self.samples_per_s / self.mean_w_samples\n",
    ),
    HandMutation(
        "ByteMLPerf QPS",
        "trim skipped only when every client is short (all for any)",
        "kit/measure/bytemlperf.py",
        "if any(len(t) <= 2 * trim for t in calls):",
        "if all(len(t) <= 2 * trim for t in calls):",
    ),
    HandMutation(
        "roofline",
        "fraction of the peak instead of the attainable bound",
        "kit/studies/roofline.py",
        "fraction = achieved / attainable if",
        "fraction = achieved / peak_gflops if",
    ),
    HandMutation(
        "scorecard",
        "the table's measured cell showing the published batch",
        "kit/publish/card_table.py",
        "r.measured_batch or r.batch_size,",
        "r.batch_size,",
    ),
]

#: the tests that run the GPU code paths through the doubles, without a GPU (issue 43)
GPU_TESTS = [
    "tests/backends/test_torch_cuda.py",
    "tests/backends/test_tensorrt_backend.py",
    "tests/backends/test_onnxruntime_backend.py",
    "tests/project/test_peers_benchmark.py",
    "tests/search/test_search.py",
    "tests/studies/test_roofline.py",
    "tests/hardware/test_cuda_device.py",
    "tests/hardware/test_kinds.py",
    "tests/batch/test_time_plan.py",
    "tests/search/test_session_keeping.py",
    "tests/models/test_zoo_capture.py",
    "tests/models/test_hf.py",
    "tests/studies/test_reference_outputs.py",
]

#: issue 43's GPU paths broken on purpose, one at a time, against GPU_TESTS
GPU_MUTATIONS = [
    HandMutation(
        "candidates",
        "the fp16 CUDA-graph candidate moved to full search only",
        "kit/search/candidates.py",
        '(\n        "fp16",\n        {"cuda_graph": True},\n        "quick",\n        "fp16 '
        "weights, copies in",
        '(\n        "fp16",\n        {"cuda_graph": True},\n        "full",\n        "fp16 '
        "weights, copies in",
    ),
    HandMutation(
        "candidates",
        "the eager bf16-weights candidate dropped from the cuda list",
        "kit/search/candidates.py",
        '    ("bf16", {}, "quick", "bf16 weights, eager, pinned bf16 host buffers"),\n',
        "",
    ),
    HandMutation(
        "candidates",
        "channels_last ignored by the backend (a CNN's weights left contiguous)",
        "kit/backends/torch_backend.py",
        "        if cnn:\n            module = module.to(memory_format=torch.channels_last)\n",
        "",
    ),
    HandMutation(
        "candidates",
        "16-bit weights ignored on the GPU (autocast over fp32 weights instead)",
        "kit/backends/torch_backend.py",
        'session.use_16bit_weights(\n                    "16-bit on a GPU as ByteMLPerf runs it '
        '(model.half(), not autocast)"\n                )',
        "pass",
    ),
    HandMutation(
        "clients",
        "the clients option ignored (one client always)",
        "kit/backends/torch_backend.py",
        "session.clients = options.clients",
        "session.clients = None",
    ),
    HandMutation(
        "clients",
        "eager clients share the device's current stream",
        "kit/backends/torch_cuda.py",
        "self.forward, self.host_inputs, self.device = forward, host_inputs, device\n"
        "        self.stream = torch.cuda.Stream(device)",
        "self.forward, self.host_inputs, self.device = forward, host_inputs, device\n"
        "        self.stream = torch.cuda.current_stream(device)",
    ),
    HandMutation(
        "clients",
        "CUDA-graph clients share the device's current stream",
        "kit/backends/torch_cuda.py",
        "self.device, self.host_inputs = device, host_inputs\n        self.stream = "
        "torch.cuda.Stream(device)",
        "self.device, self.host_inputs = device, host_inputs\n"
        "        self.stream = torch.cuda.current_stream(device)",
    ),
    HandMutation(
        "per-batch search",
        "the smaller batch's decision not passed on (skip_failed_before never applies)",
        "kit/studies/model_benchmark.py",
        'here, decision = self.timed_search(batch, keys.get(batch, ""), prior)',
        'here, decision = self.timed_search(batch, keys.get(batch, ""), None)',
    ),
    HandMutation(
        "per-batch search",
        "only the largest batch searched (one decision for every batch)",
        "kit/studies/model_benchmark.py",
        "if cfg.search and kind.search_each_batch and not kind.published_settings:",
        "if False:",
    ),
    HandMutation(
        "per-batch search",
        "skip_failed_before applied to today's mapping",
        "kit/search/planning.py",
        "if p.status == ProbeStatus.PENDING and not p.today and q is not None:",
        "if p.status == ProbeStatus.PENDING and q is not None:",
    ),
    HandMutation(
        "per-batch search",
        "a candidate that failed numerics at the smaller batch probed again",
        "kit/search/planning.py",
        "(ProbeStatus.FAILED, ProbeStatus.FAILED_NUMERICS)",
        "(ProbeStatus.FAILED,)",
    ),
    HandMutation(
        "per-batch search",
        "decided_at_batch naming the smallest batch",
        "kit/studies/model_benchmark.py",
        '"decided_at_batch": batch',
        '"decided_at_batch": min(decided)',
    ),
    HandMutation(
        "per-batch search",
        "search keys not per batch (the largest batch's key alone)",
        "kit/batch/profiles.py",
        'return {"search_key": search_keys(model, published_precision, batches, kind)}',
        'return {"search_key": search_key(model, published_precision, max(batches), kind)}',
    ),
    HandMutation(
        "capture/copies",
        "pageable host input buffers (pin_memory dropped)",
        "kit/backends/torch_cuda.py",
        "return [t.pin_memory() for t in host_tensors(arrays, dtype)]",
        "return host_tensors(arrays, dtype)",
    ),
    HandMutation(
        "capture/copies",
        "a blocking copy in the graph's copy-in",
        "kit/backends/torch_cuda.py",
        "static.copy_(host, non_blocking=True)",
        "static.copy_(host)",
    ),
    HandMutation(
        "capture/copies",
        "the graph call returns without synchronising its stream",
        "kit/backends/torch_cuda.py",
        "            self.graph.replay()\n        self.stream.synchronize()\n",
        "            self.graph.replay()\n",
    ),
    HandMutation(
        "capture/copies",
        "a kept graph replayed on stale inputs (new ones never loaded)",
        "kit/backends/torch_backend.py",
        "            call.load(host_tensors(list(inputs.values()), self.cast_floats))\n",
        "            pass\n",
    ),
    HandMutation(
        "capture/copies",
        "a graph captured again for every timed window (none kept)",
        "kit/backends/torch_backend.py",
        "        call = self.calls.get(key)\n",
        "        call = None\n",
    ),
    HandMutation(
        "capture/copies",
        "pinned outputs allocated again by every eager call",
        "kit/backends/torch_cuda.py",
        "            for host, out in zip(self.host_outputs, self.forward(on_device), "
        "strict=True):\n                host.copy_(out, non_blocking=True)\n        "
        "self.stream.synchronize()  # the copies out are asynchronous: the call ends when they "
        "land\n        return self.host_outputs\n",
        "            outputs = [o.to('cpu', non_blocking=True) for o in self.forward(on_device)]\n"
        "        self.stream.synchronize()\n        return outputs\n",
    ),
    HandMutation(
        "ORT GPU",
        "IO binding outputs left on the GPU (never copied back to the host)",
        "kit/backends/onnxruntime_backend.py",
        "binding.bind_output(name)\n",
        'binding.bind_output(name, "cuda", self.device_id)\n',
    ),
    HandMutation(
        "ORT GPU",
        "enable_cuda_graph option misnamed",
        "kit/backends/onnxruntime_backend.py",
        '{"enable_cuda_graph": "1"}',
        '{"cuda_graph": "1"}',
    ),
    HandMutation(
        "ORT GPU",
        "TensorRT provider's engine cache option dropped",
        "kit/backends/onnxruntime_backend.py",
        '            "trt_engine_cache_enable": True,\n',
        "",
    ),
    HandMutation(
        "TensorRT",
        "builder flags never set (FP16 missing from the engine)",
        "kit/backends/tensorrt_backend.py",
        "        for flag in FLAGS[precision]:\n            "
        "config.set_flag(getattr(trt.BuilderFlag, flag))\n",
        "        pass\n",
    ),
    HandMutation(
        "TensorRT",
        "engine cache key without the precision",
        "kit/backends/tensorrt_backend.py",
        '"precision": precision,\n            "shapes"',
        '"shapes"',
    ),
    HandMutation(
        "peer arms",
        "the CUDA-graph arm not copying in inside the graph",
        "benchmarks/peer_gpu_arms.py",
        "with torch.cuda.graph(graph, stream=self.stream):\n            self.copy_in()\n",
        "with torch.cuda.graph(graph, stream=self.stream):\n",
    ),
    HandMutation(
        "peer arms",
        "the compile arm compiles but runs eager",
        "benchmarks/peer_gpu_arms.py",
        'module = torch.compile(module, mode="reduce-overhead")',
        'torch.compile(module, mode="reduce-overhead")',
    ),
    HandMutation(
        "peer arms",
        "the best peer picked by kit ÷ peer (the slowest arm)",
        "benchmarks/peers.py",
        'best = max(peers, key=lambda a: peers[a]["throughput_median"])',
        'best = max(peers, key=lambda a: peers[a]["kit_over_peer"])',
    ),
    HandMutation(
        "roofline",
        "the fp32 CUDA-core peak for a 16-bit tensor-core run (torch)",
        "kit/backends/torch_backend.py",
        '    if precision != "fp32":\n        return precision\n',
        '    if precision != "fp32":\n        return "fp32"\n',
    ),
    HandMutation(
        "roofline",
        "the peak of the precision asked, not of the arithmetic that ran",
        "kit/studies/roofline.py",
        'math = session.get("math") or precision',
        "math = precision",
    ),
    HandMutation(
        "TensorRT",
        "TensorRT 11 (strongly typed) building fp16 from the fp32 export",
        "kit/backends/tensorrt_backend.py",
        '    if precision == "fp16" and typing == STRONG:\n        return convert_for_ort(model, '
        '"fp16")\n',
        "",
    ),
    HandMutation(
        "time",
        "the quick profile's GPU windows stretched to NVML's 10 s again",
        "kit/batch/profiles.py",
        '"stretch_for_power": False',
        '"stretch_for_power": True',
    ),
    HandMutation(
        "time",
        "the measurement compiling the searched torch.compile candidate again",
        "kit/studies/model_benchmark.py",
        "kept=keeper.take(batch, here.backend, here.backend_config())",
        "kept=None",
    ),
    HandMutation(
        "time",
        "a kept torch.compile session closed by the runoff that borrowed it",
        "kit/search/runoff.py",
        "if id(s) not in borrowed:",
        "if True:",
    ),
    HandMutation(
        "time",
        "probes without their compile seconds",
        "kit/search/measuring.py",
        '        p.compile_s = session.description.get("compile_s")\n',
        "",
    ),
    HandMutation(
        "time",
        "torch.compile with dynamo's automatic dynamic shapes",
        "kit/backends/torch_backend.py",
        "torch.compile(eager, mode=mode, dynamic=False)",
        "torch.compile(eager, mode=mode)",
    ),
    HandMutation(
        "time",
        "a GPU's torch eager candidates measured in every quick search",
        "kit/search/candidates.py",
        "fallback_for=eager_fallback_for(p, o)",
        'fallback_for=""',
    ),
    HandMutation(
        "per-batch search",
        "the peers' kit arm decides once at the quick batch on a GPU",
        "benchmarks/peers.py",
        "    if not kinds.get(hardware).search_each_batch:",
        "    if True:",
    ),
    HandMutation(
        "per-batch search",
        "a decision settled at another batch reused as this job's",
        "kit/search/row.py",
        "cache.load_decision(key, settings.depth, settle_batch=settings.settle_batch)",
        "cache.load_decision(key, settings.depth)",
    ),
    HandMutation(
        "masks",
        "BERT-family handed its 2D mask (transformers builds one, reading it back)",
        "kit/models/hf.py",
        "attention_mask = additive_mask(attention_mask, self.model.dtype)",
        "attention_mask = attention_mask",
    ),
    HandMutation(
        "masks",
        "CLIP's text towers handed no causal mask (transformers builds one)",
        "kit/models/hf.py",
        "        return additive_mask(self.allowed[:, :, :n, :n], dtype)",
        "        return None",
    ),
    HandMutation(
        "masks",
        "the same additive mask by Where (ByteMLPerf's Cast-Sub-Mul chain lost)",
        "kit/models/hf.py",
        "return (1 - mask.to(dtype)) * torch.finfo(dtype).min",
        "return torch.where(mask.to(torch.bool), 0.0, torch.finfo(dtype).min).to(dtype)",
    ),
    HandMutation(
        "capture/copies",
        "a capture failure traced into the double (self-hiding frames named)",
        "kit/backends/torch_cuda.py",
        'and not frame.f_globals.get("__tracebackhide__")',
        "and True",
    ),
    HandMutation(
        "time",
        "a GPU's ONNX Runtime eager candidates measured in every quick search",
        "kit/search/candidates.py",
        "fallback_for=ort_fallback_for(p, o),",
        'fallback_for="",',
    ),
    HandMutation(
        "time",
        "a GPU's bf16 CUDA graph measured in every quick search",
        "kit/search/candidates.py",
        'if precision != "fp16" and options and options != {"cuda_graph": True}:',
        'if precision != "fp16" and options:',
    ),
    HandMutation(
        "time",
        "the reference's disk entry keyed without the inputs (another input's outputs taken)",
        "kit/backends/reference_outputs.py",
        '"inputs": inputs_digest(inputs),',
        "",
    ),
    HandMutation(
        "time",
        "a rerun computing the fp32 reference again (its disk entry never read)",
        "kit/backends/reference_outputs.py",
        "    meta = None if entry is None else cache.read_entry(entry)",
        "    meta = None",
    ),
    HandMutation(
        "ORT GPU",
        "TensorRT provider's engines for every batch in one folder",
        "kit/backends/onnxruntime_backend.py",
        'str(shared / f"batch-{batch_size}" if batch_size else shared)',
        "str(shared)",
    ),
    HandMutation(
        "ORT GPU",
        "a TensorRT engine rebuilt over its file taken as read from the cache",
        "kit/backends/onnxruntime_backend.py",
        "if self.before.get(n) != stamp}",
        "if n not in self.before}",
    ),
]


def test_selection() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mutmut"]
    return list(config["pytest_add_cli_args_test_selection"])


def scratch_copy(dest: Path) -> None:
    for name in ("kit", "tests", "data", "benchmarks"):
        shutil.copytree(
            ROOT / name,
            dest / name,
            ignore=shutil.ignore_patterns("__pycache__", "weights", "datasets"),
        )
    for name in ("pyproject.toml", ".importlinter"):
        shutil.copy2(ROOT / name, dest / name)


def first_failure(output: str) -> str:
    hit = re.search(r"^FAILED (\S+)", output, re.M) or re.search(r"^ERROR (\S+)", output, re.M)
    return hit.group(1) if hit else ""


def run_one(m: HandMutation, tests: list[str]) -> tuple[bool, str]:
    with tempfile.TemporaryDirectory(prefix="kit-hand-mutation-") as tmp:
        dest = Path(tmp)
        scratch_copy(dest)
        source = (dest / m.path).read_text()
        if source.count(m.old) != 1:
            raise SystemExit(
                f"{m.path}: {m.old!r} occurs {source.count(m.old)} times (expected once): update "
                "MUTATIONS"
            )
        (dest / m.path).write_text(source.replace(m.old, m.new))
        env = {**os.environ, "PYTHONPATH": str(dest), "KIT_ROOT": str(dest)}
        cmd = [
            sys.executable,
            "-m",
            "pytest",
            "-x",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
            "-p",
            "no:randomly",
            "-o",
            "addopts=-rfE",
            *tests,
        ]
        done = subprocess.run(cmd, cwd=dest, env=env, capture_output=True, text=True)
        return done.returncode != 0, first_failure(done.stdout)


def main(argv: list[str] | None = None) -> int:
    args = list(argv if argv is not None else sys.argv[1:])
    gpu = "--gpu" in args
    picks = [int(a) for a in args if a != "--gpu"]
    mutations, tests = (GPU_MUTATIONS, GPU_TESTS) if gpu else (MUTATIONS, test_selection())
    chosen = [(i, m) for i, m in enumerate(mutations, 1) if not picks or i in picks]
    print("| # | code | mutation | killed by |\n|---|---|---|---|", flush=True)
    survivors = 0
    for i, m in chosen:
        killed, test = run_one(m, tests)
        survivors += not killed
        print(
            f"| {i} | {m.area} | {m.what} (`{m.path}`) | "
            f"{test or ('failed: see pytest' if killed else 'SURVIVED')} |",
            flush=True,
        )
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
