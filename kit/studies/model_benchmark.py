"""One published row benchmarked end to end: export, load per batch size, numerics, timing,
accuracy, power.

>>> # result = run({"model": "resnet50-torch-fp32", "small": True, "batch_sizes": [1]})
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from kit import progress
from kit.backends import BackendConfig, Placement, export_opset, reference_outputs, require_backend
from kit.backends.compile_cache import read_from_cache
from kit.datasets import evaluate_accuracy
from kit.datasets.metrics import validate_data_percent
from kit.errors import InvalidParameter, KitError
from kit.hardware import kinds
from kit.hardware.environment import cpu_peaks
from kit.measure.numerics import NumericDiff
from kit.measure.power import sampler_for
from kit.measure.time_account import phase as timed_phase
from kit.measure.time_account import timing_detail
from kit.measure.window import MeasureConfig, time_limit, timed_window
from kit.models import MODELS, ExportedModel, load_model
from kit.models.requests import ExportRequest
from kit.models.spec import validate_batch_size
from kit.precision import PublishedPrecision
from kit.results import AccuracyCheck, BackendInfo, ResultKind, RunResult
from kit.results.reasons import ReasonCode
from kit.results.sections import DeviceInfo
from kit.results.session import Session
from kit.results.tables import FailedBatch, OpBreakdown, RooflineRow
from kit.results.windows import SELF_REFERENCE
from kit.search import (
    KEEPS_NOTHING,
    Decision,
    SearchSettings,
    SessionKeeper,
    decide,
    key_hash,
    search_cost,
)
from kit.search.ahead import CompileRequest, planned_compiles
from kit.studies import op_breakdown
from kit.studies.base import RunsOnBackend, closing_all, run_study
from kit.studies.op_breakdown import reason
from kit.studies.roofline import figure_rows, gpu_roof

PUBLISHED_PRECISIONS = (PublishedPrecision.FP16, PublishedPrecision.FP8)
REFERENCE = ("onnxruntime", "fp32", "cpu")


@dataclass(frozen=True, kw_only=True)
class Config(RunsOnBackend):
    """The model notebook's parameters, validated."""

    model: str = "resnet50-torch-fp32"
    batch_sizes: tuple[int, ...] = (1, 4)
    clients: int = 1
    replicas: int = 1
    warmup: int = 5
    min_duration_s: float = 2.0
    min_count: int = 20
    # stop once the throughput's 95 % half-width is this narrow (0: no target)
    target_ci: float = 0.02
    # per batch size, the time limit; 0: 10 x min_duration_s, at least 5 s
    max_duration_s: float = 0.0
    weights: str = "random"
    small: bool = False
    seed: int = 0
    published_precision: str = "FP16"
    input_shapes: dict = field(default_factory=dict)  # for a user's .onnx with dynamic dims
    threads: int | None = None
    check_numerics: bool = True
    power: bool = True  # sample the device's power during timing (where a sensor exists)
    # lengthen each window to what the power sensor resolves (NVML: 10 s)
    stretch_for_power: bool = True
    accuracy: bool = True  # run the published accuracy check (needs data and real weights)
    dataset_dir: str = ""  # default data/datasets/<dataset>/
    data_percent: float = 100.0
    options: dict = field(default_factory=dict)
    # choose backend/precision/options by the cached per-row search (kit.search)
    search: bool = False
    search_depth: str = "quick"  # quick: short probes, no torch.compile; full: every candidate
    search_force: bool = False  # search again even when a decision is cached
    # the decision key the batch expects (kit.search.key_hash); "" for a hand-made run
    search_key: str = ""
    # the batch size the search measures candidates at; 0: the largest batch size
    search_batch: int = 0
    # (on a kind that searches each batch, a GPU, every batch size is searched and search_batch is
    # unused)
    # place each figure on the roofline (bytes from the graph, measured bandwidth)
    roofline: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.batch_sizes:
            raise InvalidParameter("batch_sizes", self.batch_sizes, "at least one batch size")
        for b in (*self.batch_sizes, *([self.search_batch] if self.search_batch else [])):
            validate_batch_size(b)
        if self.published_precision not in PUBLISHED_PRECISIONS:
            raise InvalidParameter(
                "published_precision",
                self.published_precision,
                f"one of {', '.join(PUBLISHED_PRECISIONS)}",
            )
        validate_data_percent(self.data_percent)
        self.backend_config()  # validates threads and the backend's options (kit.backends.options)
        self.measure_config()  # validates timing parameters
        if self.search:
            self.search_settings()

    def measure_config(self) -> MeasureConfig:
        return MeasureConfig(
            warmup=self.warmup,
            min_duration_s=self.min_duration_s,
            min_count=self.min_count,
            clients=self.clients,
            replicas=self.replicas,
            target_ci=self.target_ci,
            stretch_for_power=self.stretch_for_power,
            max_duration_s=time_limit(self.min_duration_s, self.max_duration_s),
        )

    def placement(self) -> Placement:
        return Placement.of(self.backend, self.precision, self.device, self.options, self.threads)

    def backend_config(self) -> BackendConfig:
        return self.placement().backend_config(kind=self.hardware)

    def exports(self) -> list[ExportRequest]:
        if self.model.endswith(".onnx"):  # the user's own file: nothing to export
            return []
        return [
            ExportRequest(
                self.model, self.small, self.weights, self.seed, export_opset(self.backend)
            )
        ]

    def search_batches(self) -> list[int]:
        """The batch sizes the row's search measures at, in the order it does: every one, smallest
        first, on a kind that searches each batch (a GPU); else the search batch (0: the
        largest)."""
        if kinds.get(self.hardware).search_each_batch:
            return sorted(self.batch_sizes)
        return [self.search_batch or max(self.batch_sizes)]

    def compiles(self) -> list[CompileRequest]:
        searches = (
            self.search
            and not kinds.get(self.hardware).published_settings
            and self.model in MODELS.names()
        )
        if not searches:
            return []
        return planned_compiles(
            self.exports()[0],
            self.published_precision,
            self.hardware,
            self.search_settings(),
            self.search_batches(),
        )

    def search_settings(self):
        # every batch decides itself: no near tie to settle
        each = kinds.get(self.hardware).search_each_batch
        return SearchSettings(
            self.search_depth,
            force=self.search_force,
            settle_batch=None if each else max(self.batch_sizes),
        )


def run(config: Config | dict) -> RunResult:
    """Benchmark one model on one backend at every batch size; never raises for a failure."""
    return run_study(
        ResultKind.MODEL_BENCHMARK,
        Config,
        config,
        execute,
        name=lambda p: p.get("model", Config.model),
    )


def execute(cfg: Config, result: RunResult) -> None:
    with (
        progress.step(f"model {cfg.model}: exporting to ONNX (or the cached export)"),
        timed_phase("export") as phase,
    ):
        model = load_model(
            cfg.model,
            small=cfg.small,
            weights=cfg.weights,
            seed=cfg.seed,
            opset=export_opset(cfg.backend),
            input_shapes=cfg.input_shapes or None,
        )
        phase.detail = f"{model.name}, opset {export_opset(cfg.backend)}"
    result.model = model.info()
    reference = require_backend("onnxruntime") if cfg.check_numerics or cfg.accuracy else None
    sampler = sampler_for(cfg.hardware, cfg.power, cuda_device=cfg.backend_config().device_id)
    per_batch: dict[int, Config] = {}
    sessions: dict[int, Session] = {}
    notes_at = len(result.notes)
    with SessionKeeper() as keeper:  # a searched torch.compile session is timed, not compiled again
        planner = BatchPlanner(cfg=cfg, model=model, result=result, keeper=keeper)
        rounds = progress.rounds(
            planner.planned_batches(),
            f"{model.name}: batch sizes",
            unit="batch size",
            total=len(cfg.batch_sizes),
        )
        for i, (batch, here) in enumerate(rounds):
            if not per_batch:
                notes_at = len(result.notes)  # the precision notes go after the (first) search's
            per_batch[batch] = here
            result.backend = backend_block(here)
            try:
                measure_one_batch(
                    here,
                    require_backend(here.backend),
                    reference,
                    model,
                    batch,
                    result,
                    sampler,
                    with_accuracy=i == 0,
                    note=rounds.note,
                    kept=keeper.take(batch, here.backend, here.backend_config()),
                )
                mark_decided_at(result, batch)
            except KitError as exc:
                result.fail(f"batch {batch}: {exc}")
                result.tables = result.tables.adding(
                    "failed_batches", FailedBatch(batch_size=batch, error=str(exc))
                )
            sessions[batch] = result.backend.session
    # the headline: the backend block, the roofline, the report's precision
    cfg = per_batch[max(cfg.batch_sizes)]
    result.notes[notes_at:notes_at] = [f"Precision: {cfg.note()}."] + [
        f"Precision at batch {b}: {c.note()}." for b, c in sorted(per_batch.items()) if c != cfg
    ]
    headline_session = sessions.get(max(cfg.batch_sizes))
    result.backend = replace(backend_block(cfg), session=headline_session or Session())
    if cfg.roofline:
        with timed_phase("roofline") as phase:
            add_roofline(result, model, cfg)
            phase.detail = "placed" if result.tables.roofline else "not placed"


def graph_precision_config(cfg: Config, model: ExportedModel) -> Config:
    """A file whose graph computes in fp16 (or bf16) runs as it is and is labelled and judged
    (peak, roofline) at that precision, never as the default fp32."""
    return replace(
        cfg,
        precision=model.precision,
        precision_note=f"{cfg.backend} {model.precision} on {cfg.device}: the precision of "
        f"{model.onnx_path.name}'s own graph (its weights), run as it is",
    )


def backend_block(cfg: Config) -> BackendInfo:
    """The result's `backend`: the backend, its config and the device it runs on."""
    backend, bcfg = require_backend(cfg.backend), cfg.backend_config()
    return BackendInfo.from_dict(
        {"name": backend.name, **bcfg.to_dict(), "device_info": backend.device_info(bcfg)}
    )


@dataclass(frozen=True, kw_only=True)
class BatchPlanner:
    """A job's batch sizes, each with the config it runs: its config, model and result, and the
    keeper its searches hold a searched torch.compile session in for the measurement to take
    (kit.search.keeping)."""

    cfg: Config
    model: ExportedModel
    result: RunResult
    keeper: SessionKeeper = KEEPS_NOTHING

    def planned_batches(self) -> Iterator[tuple[int, Config]]:
        """Each batch size with the config it runs, in the order they are measured. Where the
        kind searches each batch (a GPU), each is searched just before it is measured, smallest
        first, so the session its search kept (kit.search.keeping) is timed at once and no
        compiled model waits on the device while the next batch is searched; elsewhere the one
        plan (searched, or the job's own) is decided first and the batches run in the job's
        order."""
        cfg, kind = self.cfg, kinds.get(self.cfg.hardware)
        if cfg.search and kind.search_each_batch and not kind.published_settings:
            yield from self.searched_each_batch()
            return
        per_batch = self.batch_configs()
        # a CPU's search batch may be none of the measured ones
        self.keeper.keep_batches(cfg.batch_sizes)
        yield from ((b, per_batch[b]) for b in cfg.batch_sizes)

    def batch_configs(self) -> dict[int, Config]:
        """The config each batch size runs where the kind does not search each batch: the plan
        searched at one batch for all, else the job's own."""
        cfg, model = self.cfg, self.model
        if not cfg.search:
            graph_own = model.precision != "fp32" and cfg.precision == "fp32"
            one = graph_precision_config(cfg, model) if graph_own else cfg
            return dict.fromkeys(cfg.batch_sizes, one)
        if kinds.get(cfg.hardware).published_settings:
            self.result.notes.append(
                f"Per-row search: not run on the {cfg.hardware.upper()}, "
                "which runs its published settings."
            )
            return dict.fromkeys(cfg.batch_sizes, cfg)
        [batch] = cfg.search_batches()
        return dict.fromkeys(cfg.batch_sizes, self.timed_search(batch, cfg.search_key)[0])

    def timed_search(
        self, batch: int, expected_key: str = "", prior: Decision | None = None
    ) -> tuple[Config, Decision | None]:
        """`searched_config`, counted as the search phase at `batch` (kit.measure.time_account)."""
        with timed_phase("search", batch) as phase:
            plan, decision = self.searched_config(batch, expected_key, prior)
            searched = self.result.tables.search_decision
            reused = decision is not None and searched is not None and searched.reused
            phase.detail = (
                "not completed"
                if decision is None
                else "decision reused from the cache"
                if reused
                else search_cost(decision)
            )
        return plan, decision

    def searched_each_batch(self) -> Iterator[tuple[int, Config]]:
        """Each batch size's own decision, smallest first (a candidate that failed at one is not
        probed at the next), yielded as it is made; the last batch's probe table is the result's
        `search`, every decision's summary in `search_by_batch`."""
        cfg, result = self.cfg, self.result
        keys = (
            dict(zip(cfg.batch_sizes, cfg.search_key.split(","), strict=False))
            if cfg.search_key
            else {}
        )
        prior: Decision | None = None
        result.tables = result.tables.with_table("search_by_batch", ())
        for batch in cfg.search_batches():
            here, decision = self.timed_search(batch, keys.get(batch, ""), prior)
            prior = decision or prior
            if decision is not None:
                made = result.tables.search_decision
                result.tables = result.tables.adding("search_by_batch", made)
            yield batch, here

    def searched_config(
        self, batch: int, expected_key: str = "", prior: Decision | None = None
    ) -> tuple[Config, Decision | None]:
        """The config with the row's plan searched at `batch` (cached per row, batch and hardware)
        in place of the mapping's, and the decision (None where the search did not complete); the
        search's probe table goes into the result."""
        cfg, result = self.cfg, self.result
        try:
            decision, reused = decide(
                self.model,
                cfg.published_precision,
                batch,
                cfg.hardware,
                cfg.search_settings(),
                weights=cfg.weights,
                seed=cfg.seed,
                prior=prior,
                keeper=self.keeper,
            )
        except KitError as exc:  # e.g. no fp32 reference: the row still runs today's mapping
            result.notes.append(
                f"Per-row search not completed at batch {batch} ({exc}): today's mapping kept."
            )
            return cfg, None
        record_decision(result, decision, reused, batch, expected_key)
        # the search measured nothing: its guess never replaces the job's plan
        if decision.fallback:
            result.notes.append(
                f"Per-row search measured no candidate: the job's own plan "
                f"({cfg.backend} {cfg.precision} on {cfg.device}) is used, not the "
                "search's fallback."
            )
            return cfg, decision
        plan, at = decision.plan, decision.plan.placement
        return replace(
            cfg,
            backend=at.backend,
            precision=at.precision,
            device=at.device,
            options={**cfg.options, **at.options.to_dict()},
            threads=at.threads or cfg.threads,
            precision_note=plan.precision_note,
        ), decision


def record_decision(
    result: RunResult, decision: Decision, reused: bool, batch: int, expected_key: str
) -> None:
    """The search's probe table, its summary and a note of it in the result; a note too where its
    key is not the one the batch planned."""
    if expected_key and decision.key and key_hash(decision.key) != expected_key:
        result.notes.append(
            f"Per-row search: the decision's key {key_hash(decision.key)} is not the "
            f"batch's {expected_key} (hardware or software changed since the batch was planned)."
        )
    result.tables = result.tables.with_table(
        "search", [p.to_dict() for p in decision.probes]
    ).with_table("search_decision", decision.summary() | {"reused": reused})
    result.notes.append(
        f"Per-row search ({decision.depth}, batch {batch}): "
        f"{'decision reused from the cache' if reused else 'searched now'} "
        f"({decision.cache_file}; {search_cost(decision)}); chosen {decision.chosen}."
    )


def mark_decided_at(result: RunResult, batch: int) -> None:
    """On a kind that searches each batch, the figure just measured names the plan it ran and the
    batch its decision was made at (its own)."""
    decided = {s.batch_size: s for s in result.tables.search_by_batch}
    if batch in decided and not decided[batch].fallback:
        plan = {**decided[batch].plan, "chosen": decided[batch].chosen, "decided_at_batch": batch}
        result.measurements[-1] = replace(result.measurements[-1], searched_plan=plan)


def _device_info(result: RunResult) -> DeviceInfo:
    return result.backend.device_info if result.backend else DeviceInfo()


def _cpu_roof(result: RunResult, cfg: Config) -> tuple[dict | None, dict | None, str]:
    result.tables = result.tables.with_table("peaks", cpu_peaks())
    return _peak(result), None, ""  # bandwidth None: measured (kit.studies.roofline)


def _gpu_roof(result: RunResult, cfg: Config) -> tuple[dict | None, dict | None, str]:
    info = _device_info(result)
    session = result.backend.session.to_dict() if result.backend else {}
    peak, bandwidth, why = gpu_roof(info.name or "", session, cfg.precision)
    if result.backend:  # '% of peak' and the roofline: one peak, the unit that ran
        placed = DeviceInfo.from_dict({**info.to_dict(), "peak": peak})
        result.backend = replace(result.backend, device_info=placed)
    return peak, bandwidth, why


def _peak(result: RunResult) -> dict | None:
    """The device's peak as the backend wrote it (None where it wrote none)."""
    peak = _device_info(result).to_dict().get("peak")
    return peak if isinstance(peak, dict) else None


#: (peak, bandwidth, why not) of a run's figures, by hardware kind (kit.hardware.kinds); a kind
#: absent here (the IPU) is not placed on a roofline.
ROOFS: dict[str, Callable[[RunResult, Config], tuple[dict | None, dict | None, str]]] = {
    kinds.CPU.name: _cpu_roof,
    kinds.CUDA.name: _gpu_roof,
}


def add_roofline(result: RunResult, model: ExportedModel, cfg: Config) -> None:
    """Each measured figure's roofline position where its kind has a roof (ROOFS: the CPU's stated
    peak and measured bandwidth; on a GPU the peak of the arithmetic that ran, and '% of peak' uses
    that same peak, or none); elsewhere, why not."""
    result.tables = result.tables.with_table("peaks", ())
    roof = ROOFS.get(cfg.hardware)
    peak, bandwidth, why = (
        roof(result, cfg) if roof else (None, None, f"no roofline for {cfg.hardware} runs")
    )
    if not peak or not model.flops_per_sample or why:
        result.notes.append(
            "Roofline: not placed "
            f"({why or 'needs a CPU or GPU run with a stated peak and a FLOP count'})."
        )
        return
    ok = [m for m in result.measurements if m.throughput]
    try:
        rows = figure_rows(model, cfg.precision, peak, ok, bandwidth)
        result.tables = result.tables.with_table("roofline", rows)
        explain_below_peak(result)
    except Exception as exc:  # noqa: BLE001
        # the roofline is context; it never fails a measured run
        result.notes.append(f"Roofline: not placed ({type(exc).__name__}: {exc}).")


# a compute-bound figure under this fraction of its peak gets its breakdown's reason
BELOW_PEAK = 0.55


def explain_below_peak(result: RunResult) -> None:
    """Put the operator breakdown's reason on the roofline row it was measured at, when that
    compute-bound figure is below BELOW_PEAK of its peak."""
    found = result.tables.op_breakdown
    if found is None:
        return
    rows = [_with_breakdown(row, found) for row in result.tables.roofline]
    result.tables = result.tables.with_table("roofline", rows)


def _with_breakdown(row: RooflineRow, found: OpBreakdown) -> RooflineRow:
    """`row` with the breakdown's matrix shares where it was measured at the row's batch size, and
    its reason where the row is compute-bound below BELOW_PEAK of its peak."""
    if row.batch_size != found.batch_size:
        return row
    row = replace(
        row,
        matrix_time_share=found.matrix_time_share,
        matrix_fraction_of_peak=found.matrix_fraction_of_peak,
    )
    if row.bound == "compute" and (row.fraction_of_bound or 0.0) < BELOW_PEAK:
        row = replace(row, below_peak_reason=reason(found.to_dict()))
    return row


def measure_one_batch(
    cfg: Config,
    backend,
    reference,
    model: ExportedModel,
    batch: int,
    result: RunResult,
    sampler,
    *,
    with_accuracy: bool = False,
    note: Callable[[str], None] = lambda _: None,
    kept=None,
) -> None:
    """Load (or take `kept`, the search's own session of this very configuration), check numerics,
    time, and where asked profile and check accuracy, at one batch size."""
    sessions: list = [] if kept is None else [kept]
    accuracy_here = with_accuracy and cfg.accuracy
    with closing_all(sessions):
        inputs = model.make_inputs(batch, seed=cfg.seed)
        note(f"batch {batch}: compiling")
        with (
            progress.step(
                f"batch {batch}: compiling for {cfg.backend} {cfg.precision} "
                "(converting the ONNX first when not cached)"
            ),
            timed_phase("compile", batch) as phase,
        ):
            sessions += [
                backend.load(model, cfg.backend_config(), batch)
                for _ in range(cfg.replicas - len(sessions))
            ]
            ref_session, recalled = reference_session(
                cfg, reference, model, batch, inputs, sessions, accuracy_here
            )
            phase.detail = compile_detail(cfg, sessions, ref_session, kept, recalled)
        if kept is not None:
            result.notes.append(kept_note(batch, kept))
        assert result.backend is not None  # backend_block(), before the batches
        result.backend = replace(result.backend, session=Session.from_dict(sessions[0].description))
        if cfg.check_numerics:
            numerics_calls = (
                "one call of the measured session, the reference's outputs read (see compile)"
                if recalled
                else "one call of each session on the same inputs"
            )
            with timed_phase("numerics", batch, numerics_calls):
                check_numerics(model, sessions[0], ref_session, inputs, batch, result, recalled)
        if ref_session is not None and ref_session is not sessions[0] and not accuracy_here:
            sessions.remove(ref_session)  # no reference session stays open while the windows run
            ref_session.close()
        time_batch(cfg, model, sessions, inputs, batch, result, sampler, note)
        if accuracy_here:
            note(f"batch {batch}: accuracy")
            with (
                progress.step(f"batch {batch}: evaluating accuracy on the published dataset"),
                timed_phase("accuracy", batch) as phase,
            ):
                result.accuracy.append(check_accuracy(cfg, model, sessions[0], ref_session, batch))
                phase.detail = str(result.accuracy[-1].status or "")


def reference_session(
    cfg: Config,
    reference,
    model: ExportedModel,
    batch: int,
    inputs: dict,
    sessions: list,
    accuracy_here: bool,
) -> tuple[Any, reference_outputs.Recalled | None]:
    """The session the numerics and accuracy checks compare with, and the reference's outputs where
    an earlier run kept them. A session loaded for it joins `sessions` (closed with them); the run
    itself is the reference when it is ORT fp32 on the CPU."""
    if reference is None:
        return None, None
    if (cfg.backend, cfg.precision, cfg.device) == REFERENCE:
        return sessions[0], None
    recalled = reference_outputs.recall(model, batch, inputs) if cfg.check_numerics else None
    if recalled is None and cfg.check_numerics:
        loaded = reference.load(model, BackendConfig("fp32", "cpu"), batch)
    elif accuracy_here:
        # loaded when the accuracy check first calls it, after the timed windows
        loaded = LazySession(lambda: reference.load(model, BackendConfig("fp32", "cpu"), batch))
    else:
        return None, recalled
    sessions.append(loaded)
    return loaded, recalled


def compile_detail(
    cfg: Config, sessions: list, ref_session, kept, recalled: reference_outputs.Recalled | None
) -> str:
    """What the compile phase of one batch size loaded, and what it did not have to."""
    loaded_reference = ref_session not in (None, sessions[0]) and not isinstance(
        ref_session, LazySession
    )
    if kept is not None:
        compiled = " (the search's torch.compile session: not compiled again)"
    elif read_from_cache(sessions[0].description.get("compile_cache")):
        compiled = "; torch.compile read its graph from inductor's cache"
    elif sessions[0].description.get("engine_reused"):
        compiled = "; TensorRT read its engine from the engine cache"
    else:
        compiled = ""
    return (
        f"{cfg.backend} {cfg.precision} on {cfg.device}"
        + (" and the onnxruntime fp32 CPU reference" if loaded_reference else "")
        + compiled
        + (f"; the reference's outputs taken from {recalled.source}" if recalled else "")
    )


def time_batch(
    cfg: Config,
    model: ExportedModel,
    sessions: list,
    inputs: dict,
    batch: int,
    result: RunResult,
    sampler,
    note: Callable[[str], None],
) -> None:
    """Time the measured sessions' windows into `result`, and profile them at the largest batch
    size where the roofline is asked for."""
    mcfg = warmed_by_numerics(cfg.measure_config(), cfg.check_numerics and cfg.replicas == 1)
    note(progress.timed_note(f"batch {batch}", mcfg))  # not redrawn while timing
    with timed_phase("timing", batch) as phase:
        measurement = timed_sessions(sessions[: cfg.replicas], inputs, batch, mcfg, sampler)
        phase.detail = timing_detail(
            measurement, mcfg, "the numerics call" if mcfg.warmup < cfg.warmup else ""
        )
    assert result.backend is not None
    result.measurements.append(replace(measurement.record(), session=result.backend.session))
    if cfg.roofline and batch == max(cfg.batch_sizes):
        calls = 1 if measurement.latency.mean_ms > LONG_CALL_MS else op_breakdown.PROFILED_CALLS
        add_op_breakdown(
            result, model, cfg, session=sessions[0], inputs=inputs, batch=batch, calls=calls
        )


class LazySession:
    """A session loaded at its first call (`load()`), closed with the others if it was."""

    def __init__(self, load: Callable[[], Any]) -> None:
        self._load = load
        self.session: Any = None

    def run(self, inputs: dict) -> list:
        if self.session is None:
            self.session = self._load()
        return self.session.run(inputs)

    def close(self) -> None:
        if self.session is not None:
            self.session.close()


def kept_note(batch: int, session) -> str:
    seconds = session.description.get("compile_s")
    took = (
        f"{seconds:g} s, counted in the search phase"
        if isinstance(seconds, int | float)
        else "counted in the search phase"
    )
    return (
        f"Batch {batch}: timed on the torch.compile session the search compiled for its probe "
        f"({took}) and then ran; not compiled again."
    )


def check_numerics(
    model: ExportedModel,
    session,
    ref_session,
    inputs: dict,
    batch: int,
    result: RunResult,
    recalled: reference_outputs.Recalled | None = None,
) -> None:
    """The session's outputs against the fp32 reference's: `recalled` where the search or an
    earlier run already ran the reference on these inputs, else `ref_session`'s call (kept for the
    next run: kit.backends.reference_outputs)."""
    own = (
        "fp32"
        if model.precision == "fp32"
        else f"{model.precision}: the file's own graph, no fp32 exists"
    )
    name = (
        f"onnxruntime {own} CPU ({SELF_REFERENCE})"
        if ref_session is session
        else f"onnxruntime {own} CPU"
        + (f" (its outputs from {recalled.source})" if recalled else "")
    )
    if recalled is not None:
        ref_out = recalled.outputs
    else:
        ref_out = ref_session.run(inputs)
        if ref_session is not session:
            reference_outputs.remember(
                model, batch, inputs, ref_out, "an earlier numerics check on the same inputs"
            )
    diff = NumericDiff.between(ref_out, session.run(inputs), name)
    result.numerics.append(diff.check(batch))


# a call this long is profiled once (its operators' shares are already stable)
LONG_CALL_MS = 2000.0


def warmed_by_numerics(mcfg: MeasureConfig, numerics_ran: bool) -> MeasureConfig:
    """The timing config with one warm-up call fewer where the numerics check just ran the timed
    session on the same inputs (that call warmed it: at batch 40 a BERT call takes seconds)."""
    return replace(mcfg, warmup=max(0, mcfg.warmup - 1)) if numerics_ran else mcfg


def add_op_breakdown(
    result: RunResult,
    model: ExportedModel,
    cfg: Config,
    *,
    session,
    inputs: dict,
    batch: int,
    calls: int = op_breakdown.PROFILED_CALLS,
) -> None:
    """Where a torch CPU call's time goes (kit.studies.op_breakdown), after the timed window."""
    peak = _peak(result) or {}
    if (
        cfg.backend != "torch"
        or not kinds.get(cfg.hardware).profiles_ops
        or not model.flops_per_sample
        or not peak.get("gflops")
    ):
        return
    with timed_phase(
        "op breakdown", batch, f"torch profiler over {calls} call{'s' if calls != 1 else ''}"
    ):
        try:
            times = op_breakdown.profile_torch_session(session, inputs, calls)
            found = op_breakdown.breakdown(
                times, model.flops_per_call(batch) or 0.0, peak["gflops"], calls
            )
            result.tables = result.tables.with_table(
                "op_breakdown", {"batch_size": batch, "profiled_calls": calls, **found}
            )
        except Exception as exc:  # noqa: BLE001
            # context for the roofline; never fails a measured run
            result.notes.append(f"Operator breakdown: not measured ({type(exc).__name__}: {exc}).")


def timed_sessions(sessions: list, inputs: dict, batch: int, mcfg: MeasureConfig, sampler):
    """Clients share sessions[0]; replicas each time their own session in parallel; both through
    the one timed window."""
    if len(sessions) == 1:
        return sessions[0].measure_window(inputs, batch, mcfg, sampler)
    return timed_window([s.bind(inputs) for s in sessions], batch, mcfg, sampler)


def check_accuracy(
    cfg: Config, model: ExportedModel, session, ref_session, batch: int
) -> AccuracyCheck:
    """The published accuracy/numeric metric, or the reason it cannot be measured here."""
    try:
        return evaluate_accuracy(
            model.name,
            session,
            cfg.dataset_dir or None,
            cfg.data_percent,
            model.weights,
            batch_size=batch,
            model=model,
            reference_session=ref_session,
        )
    except KitError as exc:
        return AccuracyCheck.not_measured(model.name, str(exc), str(ReasonCode.OTHER))
