"""Where a result came from and what it shows: provenance, errors, the closing sentence."""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from pathlib import Path

from kit.hardware.gpu_verified import gpu_paths_statement
from kit.publish import glance
from kit.publish.compare import tolerance_statement
from kit.publish.report.tables import scorecard_rows
from kit.publish.scorecard import readable
from kit.published import figures as published
from kit.published.studies import PublishedStudy
from kit.results import ResultKind, ResultStatus, RunResult
from kit.results.sections import BackendInfo, Environment, ModelInfo
from kit.results.session import Session
from kit.results.tables import C2Row

METHODS: dict[str, str] = {
    ResultKind.MODEL_BENCHMARK: (
        "warm-up (outside the timed and power window), then calls in rounds until "
        "the minimum duration AND count are met and, with a target, until the throughput's 95 % "
        "interval is that narrow (or the time limit passes); 95 % intervals from the rounds "
        "(ratio estimator, t quantile; Woodruff for percentiles), never from single calls; "
        "CPU steal, other processes' load and frequency sampled over the window; power "
        "sampled over exactly the timed calls; per-call "
        "perf_counter_ns; QPS by ByteMLPerf's formula (20 calls dropped at each end per "
        "thread); raw call times kept in the results JSON"
    ),
    ResultKind.C2_STUDY: (
        "the Qwant protocol, warm-up outside the timed and power window: each replica's "
        "call preprocesses its micro batch of real images, "
        "runs it and fetches the outputs; replicas run in parallel threads; latency = mean call "
        "time; throughput = batch / latency; raw call times kept in the results JSON"
    ),
    ResultKind.SERVER_SCENARIO: (
        "MLPerf LoadGen (Poisson arrivals at each offered QPS) through the kit's "
        "dynamic batcher; p99 from LoadGen's summary; LoadGen logs kept beside the results JSON"
    ),
}


def provenance(result: RunResult) -> str:
    """An HTML block: what ran where, with which software, weights and method."""
    sections = result.sections
    env, b, m = (
        sections.environment,
        sections.backend or BackendInfo(),
        sections.model or ModelInfo(),
    )
    items = {
        "Status": result.status + ("" if not result.errors else f" ({'; '.join(result.errors)})"),
        "Source": source_line(env),
        "Hardware": hardware_line(env),
        "Backend": f"{b.name} precision {b.precision} on {b.device}"
        + (f" ({b.device_info.name})" if sections.backend else ""),
        "Session": session_line(result, b.session),
        "GPU placement": gpu_placement(b.session),
        "Model": model_line(m),
        "Weights": m.weights.label,
        "Software": ", ".join(f"{k} {v}" for k, v in env.packages.items()),
        "Allocator": env.allocator,
        "Parameters": parameters_line(result),
        "Method": METHODS.get(result.kind, METHODS[ResultKind.MODEL_BENCHMARK]),
        "Peak used for '% of peak'": b.device_info.peak.method,
        "Roofline": roofline_method(result),
        "GPU paths": gpu_paths_statement(),
        "Measured at": result.created_at,
    }
    for note in result.notes:
        items.setdefault("Notes", "")
        items["Notes"] += note + " "
    rows = "".join(
        f"<tr><th style='text-align:left'>{html.escape(k)}</th><td style='text-align:left'>"
        f"{html.escape(str(v))}</td></tr>"
        for k, v in items.items()
        if v
    )
    return (
        "<style>.provenance td{overflow-wrap:anywhere}.provenance th{min-width:6.5em}</style>"
        f"<table class='provenance'>{rows}</table><p><em>{html.escape(tolerance_statement())}"
        "</em></p>"
    )


def session_line(result: RunResult, session: Session) -> str:
    """The backend's session as recorded: the headline's (the largest batch, as
    kit.studies.model_benchmark keeps it) where each batch loaded its own (its shapes, its
    compile), then each other batch's settings that differ from it."""
    line = settings_text(session.items)
    measurements = result.sections.measurements
    batches = {m.batch_size for m in measurements}
    if not line or len(batches) < 2:
        return line
    largest = max(batches)
    others = {m.batch_size: m.session for m in measurements if m.batch_size != largest}
    head = f"the largest batch's (b{largest}; each batch loads its own): {line}"
    if any(s is None for s in others.values()):
        return head + "; the other batches' sessions were not recorded (an older result)"
    return head + "".join(
        f"; b{b}: {session_change(s, session)}" for b, s in sorted(others.items()) if s
    )


def settings_text(items: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in items.items())


def session_change(session: Session, headline: Session) -> str:
    """The settings of `session` that differ from `headline`'s ('-' where it has none), or that
    they are the same."""
    ours, theirs = session.items, headline.items
    changed = {k: ours.get(k, "-") for k in {**theirs, **ours} if ours.get(k) != theirs.get(k)}
    return settings_text(changed) if changed else "the same settings"


def parameters_line(result: RunResult) -> str:
    """The job's parameters; where a search chose the measured configuration, said to be the
    inputs it started from (their backend and precision are the published-precision mapping's)."""
    line = ", ".join(f"{k}={v}" for k, v in result.parameters.items())
    if line and result.parameters.get("search"):
        return (
            "the job's, before its search chose the configuration measured (Backend above; "
            f"backend and precision here are the published-precision mapping's): {line}"
        )
    return line


def hardware_line(env: Environment) -> str:
    """'Intel Xeon (2 cores); no IPU on this machine', with the GPUs where there are any."""
    return (
        f"{env.cpu.model} ({env.cpu.cores} cores)"
        + (f"; GPUs: {', '.join(env.gpus)}" if env.gpus else "")
        + ("; IPU present" if env.ipu_present else "; no IPU on this machine")
    )


def model_line(m: ModelInfo) -> str:
    """The model's name, size, FLOPs and the ONNX file it ran from."""
    shared = (
        f" + {m.flops_shared_per_call / 1e9:.2f} GFLOP per call whatever its batch"
        if m.flops_shared_per_call
        else ""
    )
    return (
        f"{m.name} ({m.params or '?'} parameters, {(m.flops_per_sample or 0) / 1e9:.2f} "
        f"GFLOP/sample{shared}) from {m.onnx_file or Path(m.onnx_path or '?').name}"
        + (f" at ONNX opset {m.opset}" if m.opset else "")
    )


def source_line(env: Environment) -> str:
    """One line: the kit's commit, dirty or not, and the command that re-runs the result; the
    detail (every distribution, file hashes, the job's parameters) stays in the result JSON."""
    kit = env.kit
    if kit is None:
        return "kit commit not recorded (a result from before provenance was complete)"
    if kit.commit:
        state = f"dirty, local changes sha256 {str(kit.diff_sha256)[:12]}" if kit.dirty else "clean"
        where = f"kit {kit.commit[:12]} ({state})"
    else:
        where = f"kit {kit.version or '?'} (installed, no git commit)"
    rerun = env.rerun
    n = len(env.distributions)
    return (
        f"{where}; re-run: {rerun}" if rerun else f"{where}; re-run: not a batch job, no command"
    ) + f"; {n} installed distributions listed in the JSON"


def gpu_placement(session: Session) -> str:
    """Where the kernels of a GPU session ran, from its profiled warm-up ('' off the GPU): any CPU
    share is said, since the GPU figure then includes work on the host CPU."""
    placement = session.placement
    if not placement.kernels:
        return ""
    on_cpu = placement.on_cpu
    by = ", ".join(
        f"{name.removesuffix('ExecutionProvider')} {n}"
        for name, n in sorted(placement.kernels_by_provider.items())
    )
    flag = (
        "; part of the graph runs on the host CPU: the GPU figures include that CPU work"
        if on_cpu
        else "; every kernel on the GPU"
    )
    return (
        f"{on_cpu} of {placement.kernels} kernels on the CPU ({placement.cpu_share:.1%}){flag} "
        f"({by}; {placement.method})"
    )


def roofline_method(result: RunResult) -> str:
    rows = result.sections.tables.roofline
    if not rows:
        return ""
    r = rows[0]
    return (
        f"bytes per sample: {r.bytes_method} ({r.unresolved_tensors} tensors without static shapes "
        f"not counted), weights at the run's precision shared by the batch; bandwidth "
        f"{r.bandwidth_gbs} GB/s, {r.bandwidth_method}; a figure below 25 % of its bound is flagged"
    )


def error_banner(result: RunResult) -> str:
    if result.status == ResultStatus.OK and not result.errors:
        return ""
    lines = "".join(f"<li>{html.escape(e)}</li>" for e in result.errors)
    return (
        f"<div style='color:#a00;font-weight:bold'>Run {html.escape(result.status)}:<ul>{lines}"
        "</ul></div>"
    )


def interpretation(result: RunResult) -> str:
    """One or two sentences saying what the run shows: the verdict sentence a report opens with."""
    if result.status != ResultStatus.OK:
        return f"<p>This run did not complete: {html.escape('; '.join(result.errors))}</p>"
    card, sections = scorecard_rows(result), result.sections
    hw = (sections.backend.device_info.name if sections.backend else None) or "this machine"
    parts = []
    if result.kind == ResultKind.C2_STUDY:
        parts += c2_sentences(sections.tables.c2, hw)
    else:
        parts.append(model_sentence(result, card.to_dict("records") if not card.empty else [], hw))
    if sections.model and sections.model.random_weights:
        parts.append(
            "Weights are random (real ones: kit fetch-weights): accuracy is not measured, and "
            "since numeric diffs do depend on the weights, the diff is not compared with the "
            "published Mean Diff; timings do not depend on the weights' values."
        )
    return "<p>" + " ".join(parts) + "</p>"


def c2_sentences(rows: tuple[C2Row, ...], hw: str) -> list[str]:
    """The C2 protocol's best throughput and lowest latency beside the published ones, and how its
    energy efficiency was measured (or why not)."""
    if not rows:
        return []
    best = max(rows, key=lambda r: r.throughput or 0)
    pub = published.c2_tables()
    first = rows[0]
    short = [str(r.batch_size) for r in rows if r.indicative_for("efficiency")]
    flag = (
        f" (indicative only at batch {', '.join(short)}: a power window shorter than the sensor "
        "resolves)"
        if short
        else ""
    )
    return [
        f"On {hw}, the C2 protocol peaked at {best.throughput:.1f} images/s "
        f"(batch {best.batch_size}), against {pub['Throughput'].max():.2f} images/s "
        "published for the C2 card; lowest latency "
        f"{min((r.latency_ms for r in rows if r.latency_ms is not None), default=math.nan):.2f} ms "
        f"per batch against {pub['Latency'].min():.2f} ms.",
        f"Energy efficiency: measured by {first.power_sensor}{flag}."
        if first.power_sensor
        else f"Energy efficiency not measured: {first.reason_for('efficiency') or 'no sensor'}.",
    ]


def model_sentence(result: RunResult, given: Sequence[glance.Row], hw: str) -> str:
    """The headline QPS at its published batch beside the published one, with the verdict and its
    short reason, then the counts of the row's published figures."""
    model = html.escape(str(result.parameters.get("model")))
    rows = glance.rows_of(given)
    qps = next(
        (r for r in rows if r.figure == "QPS" and r.study == PublishedStudy.BYTEMLPERF_C600), None
    )
    if qps is not None and qps.measured is not None:
        at = f" at batch {qps.batch_size}" if qps.batch_size else ""
        return (
            f"On {html.escape(hw)}, {model} reached {readable(qps.measured, 4)} samples/s{at}, "
            f"against {readable(qps.published, 6)} samples/s published on the "
            f"{html.escape(glance.published_part(qps))}{at}: <b>{html.escape(str(qps.verdict))}"
            f"</b> ({html.escape(glance.short_reason(qps))}). Its {len(rows)} published figures: "
            f"{glance.count_text(rows)}."
        )
    measurements = result.sections.measurements
    if not measurements:
        return f"On {html.escape(hw)}, {model} timed no batch size."
    best = max(measurements, key=lambda m: m.qps_bytemlperf or 0)
    why = (
        f"the published headline (batch {qps.batch_size}) has no measured figure "
        f"({html.escape(glance.short_reason(qps))})"
        if qps is not None
        else "there is no published IPU figure for this model, so nothing is compared (not "
        "comparable)"
    )
    return (
        f"On {html.escape(hw)}, {model} reached {best.qps_bytemlperf:.1f} samples/s (batch "
        f"{best.batch_size}); {why}."
    )
