"""A model benchmark's result in ByteMLPerf's own report format, beside the kit's result JSON.

`export(result, result_path)` writes `<result
folder>/bytemlperf/<Backend>/<model>/result-<precision>.json` and ByteMLPerf's diff-distribution PNG
(`<model>-to-<precision>.png`) beside it, so the kit's figures sit in the same tree, and read with
the same tools, as every vendor's published reports.

It reads the result JSON only (publishing never measures: asv's rule): every figure is one the run
recorded by ByteMLPerf's own definitions (kit.measure.bytemlperf: QPS, AVG and P99 latency over the
calls ByteMLPerf keeps; kit.measure.numerics: the diffs and their histograms), rounded as
ByteMLPerf's report writer rounds them (QPS an integer, latencies to 2 decimals, diffs to 5).
A field the run did not measure is left out, never filled: `Subgraph Coverage` (measured only on
a GPU: the share of kernels ONNX Runtime placed on it), `Device Count`, `Compile Duration`
(measured only by the IPU backend),
`Accuracy` without a diff or metric, `Version` (ByteMLPerf's own version: the kit is not
ByteMLPerf). `Backend` names the hardware part and the runtime: `CPU-AMD-EPYC-onnxruntime`.
`Dataset` is written only where the run read it (a measured accuracy metric): the diffs are taken
on the kit's seeded synthetic inputs, not on dataset samples as ByteMLPerf takes them.

Fields ByteMLPerf's format does not have (KIT_FIELDS) say what its readers would otherwise
take for granted: `Weights`, where the model's weights came from (random initialisation is named,
with "accuracy not meaningful"), and `Accuracy`'s `Diff Inputs` and `Diff Reference`, the inputs
the diffs were taken on and the run they were taken against (the fp32 CPU reference; a run that is
that reference says its zero diffs are so by construction).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeGuard

from kit import atomic
from kit.errors import MissingResource
from kit.hardware import kinds
from kit.measure.bytemlperf import UNTRIMMED
from kit.paths import inside, plain_name
from kit.precision import RunPrecision
from kit.published import figures as published
from kit.results import ResultKind, RunResult
from kit.results.sections import BackendInfo, ModelInfo
from kit.results.windows import SELF_REFERENCE, AccuracyCheck

FOLDER = "bytemlperf"
RUNTIME_NAMES = {"ipu": "poprt"}
DIFFS = {
    "Mean Diff": "mean_abs",
    "Std Diff": "std_abs",
    "Max Diff": "max_abs",
    "Max Rel-Diff": "max_rel",
    "Mean Rel-Diff": "mean_rel",
}
#: The fields the kit adds to ByteMLPerf's format (as `kit.published.bytemlperf_reports.flatten`
#: names them): what the figures were measured with, where a reader would otherwise assume a dataset
#: and real weights.
KIT_FIELDS = (
    "Weights",
    "Accuracy/Diff Inputs",
    "Accuracy/Diff Reference",
    "Performance[]/Calls Kept",
)
NOISE = re.compile(r"\((R|TM|tm|r)\)|\[.*?\]|\bCPU\b|\bProcessor\b|\b\d+-Core\b|@.*$")
#: How an IPU run through the PopRT test double labels its device (kit.backends.ipu.EMULATED_LABEL)
EMULATED = "not run on an IPU"


def part_name(name: str) -> str:
    """The first two words of a device's name, without trademarks and clocks.

    >>> part_name("AMD EPYC 7763 64-Core Processor"), part_name("Intel(R) Xeon(R) Gold 6342 CPU @ 2.80GHz")
    ('AMD-EPYC', 'Intel-Xeon')
    >>> part_name("NVIDIA H100 80GB HBM3"), part_name("C600")
    ('NVIDIA-H100', 'C600')
    """  # noqa: E501
    words = NOISE.sub(" ", name).split()
    return "-".join(re.sub(r"[^A-Za-z0-9_.]", "", w) for w in words[:2]) or "unknown"


def backend_name(result: RunResult) -> str:
    """`<KIND>-<part>-<runtime>`: what ByteMLPerf's `Backend` names (the hardware) and the runtime
    the kit measured it through, e.g. `CPU-AMD-EPYC-onnxruntime`,
    `GPU-NVIDIA-H100-onnxruntime-tensorrt` (ONNX Runtime's CUDA or TensorRT provider named),
    `IPU-C600-poprt`."""
    sections = result.sections
    backend = sections.backend or BackendInfo()
    kind = str(result.parameters.get("hardware") or backend.device_info.kind or "cpu")
    device = backend.device_info.name or sections.environment.cpu.model or ""
    runtime = str(backend.name or result.parameters.get("backend") or "unknown")
    runtime = RUNTIME_NAMES.get(runtime, runtime)
    if runtime == "onnxruntime" and backend.device in ("cuda", "tensorrt"):
        runtime += f"-{backend.device}"
    if EMULATED in str(device):  # never to be read as an IPU's figures
        runtime = f"emulated-{runtime}"
    return f"{export_name(kind)}-{part_name(str(device))}-{runtime}"


def export_name(kind: str) -> str:
    """ByteMLPerf's word for a kind ('GPU' for cuda), or a device_info class upper-cased."""
    known = kinds.REGISTRY.get(kind) if kind in kinds.REGISTRY else kinds.of_class(kind)
    return known.export_name if known else kind.upper()


def _finite(value: object) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def performance(result: RunResult) -> list[dict]:
    """One entry per measured batch size: BS, QPS (an integer, as ByteMLPerf writes it), AVG and
    P99 latency (ms, 2 decimals) over the calls ByteMLPerf keeps, and which those were where that
    is not ByteMLPerf's own trim (`Calls Kept`: a window too short to trim counts every call); a
    figure not measured is left out."""
    out = []
    for m in result.sections.measurements:
        figures = m.bytemlperf
        entry: dict = {"BS": int(m.batch_size)}
        if _finite(figures.qps):
            entry["QPS"] = int(figures.qps)
        for key, name in (("avg_latency_ms", "AVG Latency"), ("p99_latency_ms", "P99 Latency")):
            if _finite(value := figures.figure(key)):
                entry[name] = round(float(value), 2)
        if len(entry) > 1:
            if figures.kept and figures.kept.startswith(UNTRIMMED):
                entry["Calls Kept"] = figures.kept
            out.append(entry)
    return out


def dataset_metric(result: RunResult) -> AccuracyCheck | None:
    """The run's measured dataset metric (Top-1, F1, ...: a dataset was read), if any."""
    return next(
        (
            a
            for a in result.sections.accuracy
            if a.measured and _finite(a.value) and a.metric not in DIFFS
        ),
        None,
    )


def accuracy(result: RunResult, png: str) -> dict:
    """Data Percent and the dataset's metric where measured, the five diffs (rounded to 5
    decimals), the inputs they were taken on and the PNG's name where the numerics were
    checked."""
    out: dict = {}
    sections = result.sections
    if (metric := dataset_metric(result)) is not None:
        if _finite(metric.data_percent):
            out["Data Percent"] = metric.data_percent
        out[str(metric.metric)] = metric.value
    if sections.numerics:
        first = sections.numerics[0]
        out.update(
            {
                name: round(float(d), 5)
                for name, key in DIFFS.items()
                if _finite(d := first.diff(key))
            }
        )
        seed = result.parameters.get("seed", 0)
        out["Diff Inputs"] = f"synthetic (the kit's inputs, seed {seed}), not dataset samples"
        if reference := diff_reference(first.more.get("reference")):
            out["Diff Reference"] = reference
        if first.histograms:
            out["Diff Dist"] = png
    return out


def diff_reference(recorded: object) -> str | None:
    """What the diffs were taken against, as the numerics check recorded it; a run that is the
    reference itself says its diffs are zero by construction, not a backend matching it.

    >>> diff_reference("onnxruntime fp32 CPU (this run is the reference)")
    'onnxruntime fp32 CPU (this run is the reference: its diffs are zero by construction)'
    >>> diff_reference("onnxruntime fp32 CPU"), diff_reference(None)
    ('onnxruntime fp32 CPU', None)
    """
    if not isinstance(recorded, str) or not recorded:
        return None
    return recorded.replace(SELF_REFERENCE, f"{SELF_REFERENCE}: its diffs are zero by construction")


def dataset_name(model: str) -> str | None:
    """ByteMLPerf's dataset name for `model` (upper case, as its reports write it), if it has
    one."""
    specs = published.model_specs()
    rows = specs[specs["model"] == model]
    name = str(rows.iloc[0]["dataset_name"]).strip() if not rows.empty else ""
    return name.upper() if name and name.lower() != "nan" else None


def model_name(result: RunResult) -> str:
    """The model a result measured: its zoo name, or a user's own ONNX file's name without
    folder."""
    model = str(result.parameters.get("model") or result.name)
    return Path(model).stem if model.endswith(".onnx") else model


def report(result: RunResult) -> tuple[dict, str, str]:
    """(the report, its Backend, its precision) for a model benchmark result."""
    model = model_name(result)
    sections = result.sections
    backend = sections.backend or BackendInfo()
    precision = RunPrecision.parse(
        backend.precision or result.parameters.get("precision") or RunPrecision.FP32
    )
    png = f"{model}-to-{precision}.png"
    out: dict = {"Model": model.upper(), "Backend": backend_name(result)}
    host = sections.environment.cpu.model
    if host:
        out["Host Info"] = host
    if dataset_metric(result) is not None and (dataset := dataset_name(model)):
        out["Dataset"] = dataset
    if weights := (sections.model or ModelInfo()).weights.label:
        out["Weights"] = weights
    if _finite(result.parameters.get("replicas")):
        out["Instance Count"] = int(result.parameters["replicas"])
    compile_info: dict = {}
    seconds = backend.session.compile_seconds
    if _finite(seconds):
        compile_info["Compile Duration"] = round(float(seconds), 5)
    compile_info["Compile Precision"] = precision.report_name
    placement = backend.session.placement
    if placement.kernels and _finite(placement.cpu_share):  # a GPU session's profiled warm-up
        compile_info["Subgraph Coverage"] = round(100 * (1 - float(placement.cpu_share)), 2)
    out["Graph Compile"] = compile_info
    if acc := accuracy(result, png):
        out["Accuracy"] = acc
    out["Performance"] = performance(result)
    out["Execution Date"] = _date(result.created_at)
    return out, out["Backend"], precision


def _date(created_at: str) -> str:
    try:
        return dt.datetime.fromisoformat(created_at).strftime("%Y-%m-%d %H:%M:%S")
    except ValueError:
        return created_at


def export(result: RunResult, result_path: str | Path) -> Path | None:
    """Write the ByteMLPerf report of a model benchmark (and its PNG) under the result's folder;
    returns the report's path, or None for a result that is not a model benchmark or measured
    nothing."""
    if result.kind != ResultKind.MODEL_BENCHMARK or not result.measurements:
        return None
    body, backend, precision = report(result)
    model = model_name(result)
    # every name read from the result that becomes a path is a plain one, and stays in the folder
    folder = inside(
        Path(result_path).parent / FOLDER,
        f"{plain_name(backend, 'ByteMLPerf backend')}/{plain_name(model, 'model')}",
    )
    folder.mkdir(parents=True, exist_ok=True)
    numerics = result.sections.numerics
    if numerics and numerics[0].histograms:
        draw_diff_distribution(
            numerics[0].histograms, inside(folder, body["Accuracy"]["Diff Dist"])
        )
    path = inside(folder, f"result-{plain_name(precision, 'precision')}.json")
    atomic.write_text(path, json.dumps(body, indent=4))
    return path


def export_file(result_path: str | Path) -> Path | None:
    """`export` of the result JSON at `result_path`; one that is missing or not a result raises a
    KitError naming it."""
    if not Path(result_path).is_file():
        raise MissingResource(
            f"{result_path}: no such result file; give result JSON files "
            "(outputs/runs/<run_id>/<job>.json)"
        )
    return export(RunResult.read(Path(result_path)), result_path)


def draw_diff_distribution(histograms: Mapping[str, Any], path: Path) -> Path:
    """ByteMLPerf's diff-distribution figure (draw_all_diff: three log-scale histograms side by
    side, the difference, the CPU reference and the backend's output), drawn from the counts the
    result recorded. Drawn on a Figure of its own, never through pyplot, so a notebook's own plots
    and backend are left alone."""
    import numpy as np
    from matplotlib.figure import Figure

    fig = Figure(figsize=(16, 8))
    axes = fig.subplots(1, 3)
    for ax, key, label in zip(
        axes,
        ("diff", "reference", "candidate"),
        ("Diff Distribute", "CPU Result", "Backend Result"),
        strict=True,
    ):
        h = histograms[key]
        counts = np.asarray(h["counts"], dtype=float)
        edges = np.linspace(h["range"][0], h["range"][1], len(counts) + 1)
        # hist's bars as one artist: 300 bars drew in 0.7 s
        ax.stairs(counts, edges, fill=True, alpha=0.5)
        ax.set_yscale("log")
        ax.set_xlabel(label)
    fig.savefig(path, dpi=100)
    return path
