"""Where a measured figure sits on the roofline: FLOPs and bytes moved per sample from the ONNX
graph, arithmetic intensity, the compute peak at the run's precision and the memory bandwidth,
the bound (compute or memory) and how far below it the figure is.

Bytes per sample (an estimate, stated as such): the weights once per call at the precision's width,
shared by the batch (weight bytes / batch), plus every operator's activation inputs and outputs at
batch 1 (kit.models.flops.count_traffic_per_sample: no fusion, no cache reuse). The bandwidth is
measured by a STREAM-like numpy benchmark (copy and add kernels over arrays far larger than the
caches, one thread per usable core, best of several repetitions), cached per CPU. On a GPU the
peak is the one of the arithmetic that ran (the session's `math`: fp16/bf16/TF32/int8 tensor cores,
or fp32 CUDA cores) and the bandwidth the card's nominal memory bandwidth (kit.hardware.gpu_peaks).

>>> position(1e9, 1e8, peak_gflops=100.0, bandwidth_gbs=20.0, samples_per_s=50.0)["bound"]
'compute'
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from pathlib import Path

import numpy as np

from kit import atomic
from kit.hardware.environment import cpu_model, usable_cores
from kit.hardware.gpu_peaks import bandwidth_for, peak_for
from kit.models.flops import count_traffic_per_sample
from kit.paths import cache_dir
from kit.results import Measurement

#: bytes per element of (weights, activations) at each execution precision; torch autocast and
#: dynamic int8 keep activations between operators in fp32/bf16 as listed
ELEMENT_BYTES = {"fp32": (4, 4), "bf16": (2, 2), "fp16": (2, 2), "int8": (1, 4), "fp8": (1, 4)}
FAR_BELOW = 0.25  # a figure under this fraction of its bound is flagged
# above this, the FLOP count or the peak is wrong (boost clocks explain a little)
ABOVE_BOUND = 1.15
STREAM_ELEMENTS = 1 << 24  # float64 per array: 128 MiB, far beyond any L3 here
STREAM_REPEATS = 5
TRAFFIC_VERSION = 2


def position(
    flops_per_sample: float,
    bytes_per_sample: float,
    *,
    peak_gflops: float,
    bandwidth_gbs: float,
    samples_per_s: float,
) -> dict:
    """The roofline position of one figure: intensity, attainable rate, bound, fraction, flag."""
    intensity = flops_per_sample / bytes_per_sample
    memory_roof = intensity * bandwidth_gbs
    attainable = min(peak_gflops, memory_roof)
    achieved = flops_per_sample * samples_per_s / 1e9
    fraction = achieved / attainable if attainable > 0 else float("nan")
    return {
        "flops_per_sample": flops_per_sample,
        "bytes_per_sample": bytes_per_sample,
        "intensity_flop_per_byte": intensity,
        "ridge_flop_per_byte": peak_gflops / bandwidth_gbs,
        "bound": "compute" if memory_roof >= peak_gflops else "memory",
        "attainable_gflops": attainable,
        "achieved_gflops": achieved,
        "fraction_of_bound": fraction,
        "far_below": bool(fraction < FAR_BELOW),
        "above_bound": bool(fraction > ABOVE_BOUND),
    }


def bytes_per_sample(traffic: dict, precision: str, batch_size: int) -> float:
    """Weights and the activations of inputs that are not batched are moved once per call."""
    w, a = ELEMENT_BYTES.get(precision, ELEMENT_BYTES["fp32"])
    shared = traffic["weight_elements"] * w + traffic.get("shared_activation_elements", 0) * a
    return shared / batch_size + traffic["activation_elements"] * a


def graph_traffic(onnx_path: Path, inputs) -> dict:
    """count_traffic_per_sample, cached per ONNX file (its name, size and modification time)."""
    st = onnx_path.stat()
    stamp = hashlib.sha1(
        f"{onnx_path.resolve()}|{st.st_size}|{st.st_mtime_ns}|v{TRAFFIC_VERSION}".encode()
    )
    path = cache_dir() / "roofline" / f"{onnx_path.stem}-traffic-{stamp.hexdigest()[:10]}.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        pass
    traffic = count_traffic_per_sample(onnx_path, inputs)
    if not all(i.batched for i in inputs):  # split what each sample adds from what each call shares
        per_sample = (
            count_traffic_per_sample(onnx_path, inputs, 2)["activation_elements"]
            - traffic["activation_elements"]
        )
        traffic["shared_activation_elements"] = max(traffic["activation_elements"] - per_sample, 0)
        traffic["activation_elements"] = per_sample
    _write(path, traffic)
    return traffic


def memory_bandwidth(refresh: bool = False) -> dict:
    """The measured memory bandwidth (GB/s) with its method, cached per CPU model and core count."""
    key = hashlib.sha1(f"{cpu_model()}|{usable_cores()}".encode()).hexdigest()[:10]
    path = cache_dir() / "roofline" / f"bandwidth-{key}.json"
    if not refresh:
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            pass
    result = stream_benchmark()
    _write(path, result)
    return result


def stream_benchmark(
    elements: int = STREAM_ELEMENTS, repeats: int = STREAM_REPEATS, threads: int | None = None
) -> dict:
    """STREAM-like copy (16 B/element) and add (24 B/element) over float64 arrays, `threads` slices
    in parallel (numpy releases the GIL); the best repetition of the faster kernel."""
    threads = threads or usable_cores()
    a, b, c = (np.full(elements, v, dtype=np.float64) for v in (1.0, 2.0, 0.0))
    bounds = np.linspace(0, elements, threads + 1, dtype=int)
    slices = [slice(lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)]
    kernels = {
        "copy": (lambda s: np.copyto(c[s], a[s]), 16),
        "add": (lambda s: np.add(a[s], b[s], out=c[s]), 24),
    }
    best: dict[str, float] = {}
    for name, (run, per_element) in kernels.items():
        rates = []
        for _ in range(repeats):
            workers = [threading.Thread(target=run, args=(s,)) for s in slices]
            t0 = time.perf_counter()
            for w in workers:
                w.start()
            for w in workers:
                w.join()
            rates.append(per_element * elements / (time.perf_counter() - t0) / 1e9)
        best[name] = max(rates)
    kernel = max(best, key=lambda k: best[k])
    return {
        "gbs": round(best[kernel], 2),
        "kernels_gbs": {k: round(v, 2) for k, v in best.items()},
        "method": f"measured: STREAM-like numpy {kernel} kernel "
        f"({'16' if kernel == 'copy' else '24'} B counted per element; write-allocate traffic not "
        f"counted), {elements * 8 >> 20} MiB arrays, {threads} threads, best of {repeats}",
        "load_average": os.getloadavg()[0],
        "cpu": cpu_model(),
        "cores": usable_cores(),
    }


def _write(path: Path, payload: dict) -> None:
    atomic.write_text(path, json.dumps(payload, indent=1))


def gpu_roof(gpu_name: str, session: dict, precision: str) -> tuple[dict | None, dict | None, str]:
    """(peak, bandwidth, why not) for a GPU run: the peak of the arithmetic the session says ran
    (`math`; its precision where it does not say), the card's nominal bandwidth."""
    math = session.get("math") or precision
    peak, bandwidth = peak_for(gpu_name, math), bandwidth_for(gpu_name)
    if peak is None:
        return None, bandwidth, f"no {math} peak tabled for {gpu_name} (data/gpu/peaks.csv)"
    if bandwidth is None:
        return peak, None, f"no memory bandwidth tabled for {gpu_name} (data/gpu/bandwidth.csv)"
    return peak, bandwidth, ""


def figure_rows(
    model,
    precision: str,
    peak: dict,
    measurements: list[Measurement],
    bandwidth: dict | None = None,
) -> list[dict]:
    """One roofline row per measured batch size (a result's Measurement each) of an
    ExportedModel. FLOPs a call does once (inputs that are not batched) are spread over its samples.
    `bandwidth`: a GPU's (gpu_roof); the CPU's is measured."""
    traffic = graph_traffic(Path(model.onnx_path), model.inputs)
    bandwidth = bandwidth or memory_bandwidth()
    rows = []
    for m in measurements:
        per_sample = bytes_per_sample(traffic, precision, m.batch_size)
        rows.append(
            {
                "batch_size": m.batch_size,
                "precision": precision,
                **position(
                    model.flops_per_sample_at(m.batch_size),
                    per_sample,
                    peak_gflops=peak["gflops"],
                    bandwidth_gbs=bandwidth["gbs"],
                    samples_per_s=m.throughput or 0.0,
                ),
                "peak_gflops": peak["gflops"],
                "peak_unit": peak.get("unit", "GFLOP/s"),
                "peak_precision": peak.get("precision", precision),
                "peak_method": peak.get("method", ""),
                "bandwidth_gbs": bandwidth["gbs"],
                "bandwidth_method": bandwidth["method"],
                "bytes_method": traffic["method"],
                "unresolved_tensors": traffic["unresolved"],
            }
        )
    return rows
