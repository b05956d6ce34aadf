"""The Server-scenario study: fixed-batch latencies, LoadGen search per
batching policy, the simulator's prediction and its error, and the C2 card prediction."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kit import progress
from kit.backends import BackendConfig, Placement, export_opset, require_backend
from kit.backends.base import Session
from kit.errors import InvalidParameter
from kit.measure.time_account import phase as timed_phase
from kit.measure.window import MeasureConfig
from kit.models import load_model
from kit.models.requests import ExportRequest
from kit.models.spec import ExportedModel
from kit.paths import outputs_dir
from kit.published import figures as published
from kit.results import BackendInfo, ResultKind, RunResult
from kit.studies.base import RunsOnBackend, closing_all, run_study
from kit.studies.serving.batcher import BatchPolicy
from kit.studies.serving.loadgen_sut import (
    BatchExecutor,
    LoadGenConfig,
    LoadGenRunner,
    SampleLibrary,
)
from kit.studies.serving.search import Probe, SearchResult, find_max_qps
from kit.studies.serving.simulate import ServiceModel, predict_max_qps, simulate
from kit.studies.serving.summary import LoadGenSummary

# the notebook's (tests/studies/test_parameters.py checks they agree)
DEFAULT_POLICIES = ((1, 0.0), (4, 20.0))
C2_POLICIES = ((1, 0.0), (2, 2.0), (4, 5.0), (6, 10.0))
PREDICTION_LABEL = "PREDICTION: simulated from the published C2 latency table, not measured"
CRITERIA = ("bound", "valid")


def per_ipu_table(card_latency_ms: dict[int, float], ipus: int | None = None) -> dict[int, float]:
    """Card batch b -> micro batch b/ipus per IPU server, same ms (the IPUs run in parallel);
    `ipus` defaults to the published C2 setup (one PopART session per IPU)."""
    ipus = ipus or published.c2_ipus()
    return {int(b) // ipus: float(ms) for b, ms in card_latency_ms.items() if int(b) % ipus == 0}


def measure_latency_table(
    session: Session,
    model: ExportedModel,
    sizes: Sequence[int],
    duration_s: float = 1.0,
    min_count: int = 5,
) -> dict[int, list[float]]:
    """Per-call latencies (ms) of fixed batches: the simulator's input."""
    cfg = MeasureConfig(warmup=2, min_duration_s=duration_s, min_count=min_count)
    table = {}
    for b in sizes:
        m = session.measure_window(model.make_inputs(b), b, cfg)
        table[b] = [(end - start) / 1e6 for thread in m.calls for start, end in thread]
    return table


def table_sizes(policies: Sequence[BatchPolicy]) -> list[int]:
    top = max(p.max_batch for p in policies)
    powers = [1 << i for i in range(top.bit_length()) if 1 << i <= top]
    return sorted({1, top, *powers, *(p.max_batch for p in policies)})


def loadgen_probe(
    runner: LoadGenRunner,
    base: LoadGenConfig,
    policy: BatchPolicy,
    log_root: Path,
    criterion: str = "bound",
) -> Callable[[float], Probe]:
    """run(qps) for the search: one LoadGen Server test, judged on the bound or on VALID."""

    def run(qps: float) -> Probe:
        cfg = LoadGenConfig(**{**base.to_dict(), "scenario": "Server", "target_qps": qps})
        s = runner.run(cfg, policy, log_root / _slug(policy) / f"qps-{qps:.3f}")
        passed = (
            s.valid
            if criterion == "valid"
            else (
                s.meets_bound(cfg.latency_bound_ms)
                and s.constraints.get("Performance constraints satisfied", True)
            )
        )
        return Probe(
            qps=qps,
            p99_ms=s.p99_ms,
            passed=bool(passed),
            valid=s.valid,
            reasons=s.reasons,
            extra=_probe_extra(s),
        )

    return run


def _probe_extra(s: LoadGenSummary) -> dict:
    return {
        "result": s.result,
        "completed_sps": s.samples_per_second,
        "p90_ms": s.p90_ms,
        "mean_ms": s.mean_ms,
        "log_dir": s.log_dir,
        "batcher": s.extra.get("batcher"),
        "lost_queries": s.extra.get("lost_queries"),
        "duplicate_completions": s.extra.get("duplicate_completions"),
    }


def _slug(policy: BatchPolicy) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "-", policy.label).strip("-")


def compare_rows(
    policy: BatchPolicy, search: SearchResult, service: ServiceModel, sim_queries: int, seed: int
) -> list[dict]:
    """Each LoadGen probe beside the simulator's p99 at the same offered rate."""
    rows = []
    for p in search.probes:
        sim = simulate(service, policy, p.qps, queries=sim_queries, seed=seed)
        err = 100 * (sim.p99_ms - p.p99_ms) / p.p99_ms if p.p99_ms else None
        rows.append(
            {
                "policy": policy.label,
                "offered_qps": p.qps,
                "loadgen_p99_ms": p.p99_ms,
                "sim_p99_ms": sim.p99_ms,
                "p99_error_pct": err,
                "passed": p.passed,
                "loadgen_result": p.extra.get("result"),
                "completed_sps": p.extra.get("completed_sps"),
                "mean_batch": (p.extra.get("batcher") or {}).get("mean_batch"),
                "sim_mean_batch": sim.mean_batch,
                "reasons": "; ".join(p.reasons),
                "log_dir": p.extra.get("log_dir"),
            }
        )
    return rows


def best_row(
    policy: BatchPolicy,
    search: SearchResult,
    predicted: SearchResult,
    capacity: float,
    bound_ms: float,
) -> dict:
    lg_best, sim_best = search.best_qps, predicted.best_qps
    err = 100 * (sim_best - lg_best) / lg_best if lg_best and sim_best else None
    best = search.best
    return {
        "policy": policy.label,
        "max_batch": policy.max_batch,
        "timeout_ms": policy.timeout_ms,
        "latency_bound_ms": bound_ms,
        "loadgen_best_qps": lg_best,
        "loadgen_p99_ms": best.p99_ms if best else None,
        "loadgen_result": (best.extra.get("result") if best else None) or "none passed",
        "loadgen_reasons": "; ".join(best.reasons if best else _lowest(search).reasons),
        "sim_best_qps": sim_best,
        "prediction_error_pct": err,
        "capacity_qps": capacity,
        "search_stopped": search.stopped,
        "probes": len(search.probes),
    }


def _lowest(search: SearchResult) -> Probe:
    """The gentlest probe: when nothing passed, its reasons say why."""
    return min(search.probes, key=lambda p: p.qps)


def simulated_curve(
    service: ServiceModel,
    policy: BatchPolicy,
    capacity: float,
    points: int,
    queries: int,
    seed: int,
) -> list[dict]:
    rates = np.linspace(capacity / points, capacity * 0.98, points)
    return [
        {
            "policy": policy.label,
            "offered_qps": float(q),
            "sim_p99_ms": simulate(service, policy, float(q), queries=queries, seed=seed).p99_ms,
        }
        for q in rates
    ]


def c2_prediction(
    card_latency_ms: dict[int, float],
    policies: Sequence[BatchPolicy],
    bound_ms: float,
    queries: int = 20000,
    seed: int = 0,
) -> list[dict]:
    """What the C2 card would sustain under `bound_ms`: two IPU servers, published latencies."""
    ipus = published.c2_ipus()
    service = ServiceModel(per_ipu_table(card_latency_ms, ipus), resample=False)
    rows = []
    for policy in policies:
        pred = predict_max_qps(service, policy, bound_ms, servers=ipus, queries=queries, seed=seed)
        rows.append(
            {
                "policy (per IPU)": policy.label,
                "servers": ipus,
                "latency_bound_ms": bound_ms,
                "predicted_max_qps": pred.best_qps,
                "predicted_p99_ms": pred.best.p99_ms if pred.best else None,
                "capacity_qps": service.capacity(policy, ipus),
                "limited_by": "capacity" if pred.stopped == "upper bound" else "latency bound",
                "label": PREDICTION_LABEL,
                "source": published.c2_latency_source(),
            }
        )
    return rows


@dataclass(frozen=True, kw_only=True)
class Config(RunsOnBackend):
    """The server notebook's parameters, validated."""

    model: str = "resnet50-torch-fp32"
    latency_bound_ms: float = 100.0
    policies: tuple[tuple[float, ...], ...] = DEFAULT_POLICIES  # (max batch B, timeout T ms) each
    small: bool = False
    min_duration_s: float = 2.0
    min_query_count: int = 16
    max_duration_s: float = 10.0
    sample_count: int = 32
    max_probes: int = 3
    rel_tol: float = 0.1
    criterion: str = "bound"
    fixed_batch_duration_s: float = 1.0
    threads: int | None = None
    c2_latency_ms: dict | None = None  # None: the published C2 Table 1
    c2_policies: tuple[tuple[float, ...], ...] = C2_POLICIES
    sim_queries: int = 20000
    seed: int = 0
    output_dir: str = ""  # LoadGen logs; empty: outputs/loadgen/

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.policies:
            raise InvalidParameter("policies", self.policies, "at least one (B, T ms) policy")
        self.batch_policies()
        [BatchPolicy.parse(p) for p in self.c2_policies]
        if self.criterion not in CRITERIA:
            raise InvalidParameter("criterion", self.criterion, f"one of {', '.join(CRITERIA)}")
        self.backend_config()
        self.loadgen_config()

    def batch_policies(self) -> list[BatchPolicy]:
        return [BatchPolicy.parse(p) for p in self.policies]

    def exports(self) -> list[ExportRequest]:
        if self.model.endswith(".onnx"):  # the user's own file: nothing to export
            return []
        return [ExportRequest(self.model, self.small, opset=export_opset(self.backend))]

    def placement(self) -> Placement:
        return Placement.of(self.backend, self.precision, self.device, threads=self.threads)

    def backend_config(self) -> BackendConfig:
        return self.placement().backend_config(kind=self.hardware)

    def loadgen_config(self) -> LoadGenConfig:
        return LoadGenConfig(
            latency_bound_ms=self.latency_bound_ms,
            min_duration_s=self.min_duration_s,
            min_query_count=self.min_query_count,
            max_duration_s=self.max_duration_s,
            sample_count=self.sample_count,
            seed=self.seed,
        )

    def log_dir(self) -> Path:
        return Path(self.output_dir) if self.output_dir else outputs_dir() / "loadgen"


def run(config: Config | dict) -> RunResult:
    """The whole study as a RunResult (kind 'server_scenario'); never raises for a failure."""
    return run_study(
        ResultKind.SERVER_SCENARIO,
        Config,
        config,
        execute,
        name=lambda p: (
            f"{p.get('model', Config.model)}-{p.get('backend', Config.backend)}"
            f"-{p.get('precision', Config.precision)}"
        ),
    )


def execute(cfg: Config, result: RunResult) -> None:
    result.notes.append(f"Precision: {cfg.note()}.")
    with (
        progress.step(f"model {cfg.model}: exporting to ONNX (or the cached export)"),
        timed_phase("export", detail=cfg.model),
    ):
        model = load_model(cfg.model, small=cfg.small, opset=export_opset(cfg.backend))
    backend = require_backend(cfg.backend)
    policies = cfg.batch_policies()
    top = max(p.max_batch for p in policies)
    sizes = table_sizes(policies)
    sessions: dict[int, Session] = {}
    opened: list[Session] = []
    with closing_all(opened):
        loaded = [top] if model.dynamic_batch else sizes
        with (
            progress.step(f"compiling for {cfg.backend} {cfg.precision}"),
            timed_phase("compile", detail=f"{cfg.backend} {cfg.precision} at batch {loaded}"),
        ):
            for b in loaded:
                sessions[b] = backend.load(model, cfg.backend_config(), b)
                opened.append(sessions[b])
        result.model = model.info()
        result.backend = BackendInfo.from_dict(
            {
                "name": backend.name,
                **cfg.backend_config().to_dict(),
                "session": sessions[top].description,
                "device_info": backend.device_info(cfg.backend_config()),
            }
        )
        with timed_phase("timing", detail=f"the fixed-batch latency table at batch {sizes}"):
            table = latency_table(sessions, model, sizes, cfg.fixed_batch_duration_s)
        result.tables = result.tables.with_table("fixed_batch", fixed_batch_rows(table))
        search_policies(cfg, result, sessions, model, ServiceModel(table), policies)
    result.notes.append(
        f"Pass criterion '{cfg.criterion}': "
        + (
            "LoadGen VALID."
            if cfg.criterion == "valid"
            else f"LoadGen p99 <= {cfg.latency_bound_ms:g} ms with no lost query; LoadGen's "
            "VALID/INVALID and its reasons are reported beside it (short runs are INVALID for "
            "early stopping alone)."
        )
    )
    result.notes.append(
        "Simulator: Poisson arrivals through the same (B, T) policy, service times "
        "resampled from the fixed-batch measurements above; prediction error = "
        "(simulated - LoadGen) / LoadGen."
    )
    _c2(
        result,
        cfg.c2_latency_ms,
        [BatchPolicy.parse(p) for p in cfg.c2_policies],
        cfg.latency_bound_ms,
        cfg.sim_queries,
        cfg.seed,
    )


def latency_table(
    sessions: dict[int, Session], model: ExportedModel, sizes: list[int], duration_s: float
) -> dict[int, list[float]]:
    """One dynamic-batch session timed at every size, or each fixed-size session at its own."""
    if model.dynamic_batch:
        session = next(iter(sessions.values()))
        return measure_latency_table(session, model, sizes, duration_s)
    return {b: measure_latency_table(sessions[b], model, [b], duration_s)[b] for b in sizes}


def fixed_batch_rows(table: dict[int, list[float]]) -> list[dict]:
    return [
        {
            "batch_size": b,
            "median_ms": float(np.median(v)),
            "p99_ms": float(np.percentile(v, 99)),
            "samples_per_s": b / (float(np.median(v)) / 1e3),
            "calls": len(v),
        }
        for b, v in table.items()
    ]


def search_policies(
    cfg: Config,
    result: RunResult,
    sessions: dict[int, Session],
    model: ExportedModel,
    service: ServiceModel,
    policies: list[BatchPolicy],
) -> None:
    """For each policy: LoadGen's highest passing QPS beside the simulator's prediction."""
    base = cfg.loadgen_config()
    executor = BatchExecutor(sessions, model.inputs, dynamic=model.dynamic_batch)
    library = SampleLibrary(model.inputs, base.sample_count, cfg.seed)
    executor.warm_up(library[0], repeats=1)
    runner = LoadGenRunner(executor, library)
    for key in ("probes", "best", "simulated_curve"):
        result.tables = result.tables.adding(key)
    bound, queries, seed = cfg.latency_bound_ms, cfg.sim_queries, cfg.seed
    for policy in progress.rounds(policies, "LoadGen search per batching policy", unit="policy"):
        capacity = service.capacity(policy)
        predicted = predict_max_qps(service, policy, bound, queries=queries, seed=seed)
        start = predicted.best_qps or capacity / 4
        probe = loadgen_probe(runner, base, policy, cfg.log_dir(), cfg.criterion)
        with timed_phase("timing", detail=f"LoadGen's search, policy {policy.label}") as phase:
            search = find_max_qps(
                probe,
                start_qps=start,
                upper_qps=capacity * 1.5,
                rel_tol=cfg.rel_tol,
                max_probes=cfg.max_probes,
                min_qps=start / 16,
            )
            phase.detail += f": {len(search.probes)} LoadGen runs"
        curve = simulated_curve(service, policy, capacity, 12, queries, seed)
        result.tables = (
            result.tables.adding("probes", *compare_rows(policy, search, service, queries, seed))
            .adding("best", best_row(policy, search, predicted, capacity, bound))
            .adding("simulated_curve", *curve)
        )


def _c2(
    result: RunResult,
    card_latency_ms: dict | None,
    policies: list[BatchPolicy],
    bound_ms: float,
    sim_queries: int,
    seed: int,
) -> None:
    try:
        table = card_latency_ms or published.c2_latency_ms()
    except Exception as exc:  # noqa: BLE001 - the prediction is optional
        result.tables = result.tables.with_table("c2_prediction_skipped", str(exc))
        result.notes.append(f"C2 prediction skipped: {exc}")
        return
    rows = c2_prediction(
        {int(k): float(v) for k, v in table.items()}, policies, bound_ms, sim_queries, seed
    )
    result.tables = result.tables.with_table("c2_prediction", rows)
    result.notes.append(PREDICTION_LABEL)
