"""What a profile costs before it runs: each job's timed windows and search probes, from its own
parameters, for a run that measures everything (no result reused, no search decision cached).

- Timed windows: their floor (each window's minimum duration, raised to what the kind's power
  sensor resolves where the job stretches for it) and their limit (what a window whose interval
  stays wide may take). No measuring run takes less than the floor.
- Search probes: how many candidates the searches measure and their timed seconds if none stops
  early (a clear loser stops after a quarter of its probe, one that fails to load or fails the
  numerics gate is not timed); the FP8 row takes the FP16 row's figures where kit.search.sharing
  lets it. torch.compile candidates are counted apart: on a GPU each compiles for tens of seconds.

Loading and compiling candidates, exports, warm-up calls, the accuracy check and the roofline's
bandwidth measurement come on top. `kit reproduce --plan` prints it; a run's result then says where
its seconds went (kit.measure.time_account).

>>> floors = plan_profile("quick", "cpu")
>>> floors[0].job, floors[0].window_floor_s
('published_results', 0.0)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from kit.batch import Job
from kit.batch.jobs import runs_warm
from kit.batch.prepare import compile_requests, export_requests, parallel_compiles, parallel_exports
from kit.batch.profiles import C2_MODEL, jobs_for
from kit.hardware import kinds
from kit.hardware.cuda import first_gpu_free_bytes
from kit.measure.power import SAMPLERS, SENSORS
from kit.measure.window import HARD_LIMIT, MeasureConfig, power_resolved, time_limit
from kit.results import ResultKind
from kit.search.candidates import tensorrt_python
from kit.search.planning import PROBE_DEFAULTS, planned_probes
from kit.search.probe import ProbeStatus
from kit.search.sharing import shareable
from kit.studies import c2
from kit.studies.server import table_sizes
from kit.studies.serving.batcher import BatchPolicy


@dataclass(frozen=True, kw_only=True)
class JobFloor:
    """One job's timed windows and search probes."""

    job: str
    model: str = ""  # the model it exports (each distinct one once)
    windows: int = 0  # timed windows at the job's own settings
    window_floor_s: float = 0.0  # their minimum durations (raised to the power sensor's window)
    # their time limits (a window whose interval stays wide stops there)
    window_limit_s: float = 0.0
    searches: int = 0  # search batches (a GPU searches at every published batch)
    probes: int = 0  # candidates the searches measure (the sibling row's shared ones left out)
    probe_s: float = 0.0  # their timed seconds if none stops early
    compiles: int = 0  # of those probes, torch.compile candidates (tens of seconds each on a GPU)
    engine_builds: int = 0  # of those probes, TensorRT engines built (engine cache empty)
    warm: bool = False  # runs in the batch's warm kernel (kit.batch.jobs.runs_warm)
    note: str = ""

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True)
class PlannedProbe:
    """A candidate one search of the row measures."""

    compiles: bool
    shareable: bool  # may take the sibling row's figures (kit.search.sharing)
    builds_engine: bool = False


def windows(
    batches: int, min_s: float, max_s: float, kind: str, power: bool = True
) -> tuple[float, float]:
    """(floor, limit) of `batches` timed windows of at least `min_s`, at most `max_s` each; `power`:
    each lengthened as the timed window does for the kind's power sensors (power_resolved)."""
    cfg = MeasureConfig(warmup=0, min_duration_s=min_s, max_duration_s=time_limit(min_s, max_s))
    for name in SENSORS[kind].samplers if power and kind in SENSORS else ():
        cfg = power_resolved(cfg, SAMPLERS.get(name))  # reads the sampler class's min_window_s
    return batches * cfg.min_duration_s, batches * cfg.max_duration_s


def search_probes(model: str, published: str, kind: str, depth: str) -> dict[str, PlannedProbe]:
    """The candidates one search of the row measures at `depth`, by label (as kit.search plans
    them)."""
    return {
        p.label: PlannedProbe(p.placement.options.compiles, shareable(p), p.placement.builds_engine)
        for p in planned_probes(
            model, published, kind, depth, kinds.get(kind).planned_ort_providers()
        )
        if p.status == ProbeStatus.PENDING
    }


def search_batches(p: dict) -> list[int]:
    """The batches a model job searches at: every published one (search_each_batch) or one."""
    return [p["search_batch"]] if "search_batch" in p else list(p["batch_sizes"])


def model_floor(job: Job, kind: str, measured: dict[tuple[str, int], set[str]]) -> JobFloor:
    """`measured`: the candidates earlier rows of the same model measured at each batch; this row
    takes those it may share (kit.search.sharing) instead of measuring them."""
    p = job.parameters
    floor, limit = windows(
        len(p["batch_sizes"]),
        p["min_duration_s"],
        p["max_duration_s"],
        kind,
        power=p.get("stretch_for_power", True),
    )
    if not p.get("search"):
        return JobFloor(
            job=job.name,
            model=p["model"],
            windows=len(p["batch_sizes"]),
            window_floor_s=floor,
            window_limit_s=limit,
            note="no search",
        )
    own = search_probes(p["model"], p["published_precision"], kind, p["search_depth"])
    new: list[PlannedProbe] = []
    for batch in search_batches(p):
        before = measured.setdefault((p["model"], batch), set())
        new += [probe for label, probe in own.items() if not (probe.shareable and label in before)]
        before.update(own)
    probe_s = PROBE_DEFAULTS[p["search_depth"]][0]
    return JobFloor(
        job=job.name,
        model=p["model"],
        windows=len(p["batch_sizes"]),
        window_floor_s=floor,
        window_limit_s=limit,
        searches=len(search_batches(p)),
        probes=len(new),
        probe_s=len(new) * probe_s,
        compiles=sum(probe.compiles for probe in new),
        engine_builds=sum(probe.builds_engine for probe in new),
    )


def c2_floor(job: Job, kind: str, measured: dict) -> JobFloor:
    p = job.parameters
    batches = len(c2.Config.batch_sizes)
    floor, limit = windows(batches, p["min_duration_s"], p["max_duration_s"], kind)
    return JobFloor(
        job=job.name, model=C2_MODEL, windows=batches, window_floor_s=floor, window_limit_s=limit
    )


def server_floor(job: Job, kind: str, measured: dict) -> JobFloor:
    """One LoadGen window per policy at least (up to max_probes each), and the fixed-batch latency
    table's window at each of its batch sizes."""
    p = job.parameters
    sizes = len(table_sizes([BatchPolicy(int(b), float(t)) for b, t in p["policies"]]))
    floor, limit = windows(
        len(p["policies"]), p["min_duration_s"], p["max_duration_s"], kind, power=False
    )
    table = sizes * p["fixed_batch_duration_s"]
    return JobFloor(
        job=job.name,
        model=p["model"],
        windows=len(p["policies"]) + sizes,
        window_floor_s=floor + table,
        window_limit_s=limit * p["max_probes"] + table,
        note=f"LoadGen: up to {p['max_probes']} windows a policy; {sizes} fixed-batch windows",
    )


#: What a cold quick run pays on a kind besides its windows and probes, read from one run's time
#: accounts (issue 50: an H200, 16 cores, torch 2.11, CLIP 94 s a row): a torch.compile about 30 s,
#: another candidate's load about 3 s, a notebook about 16 s outside its study, an export about 5 s;
#: a warm rerun (decisions, exports and inductor's kernels cached) compiles the chosen candidate of
#: each searched batch again from the kernel cache, about a fifth; a search's compile of a graph
#: compiled ahead (kit.search.ahead) reads it from the same cache, the same fifth (7 s of 36 s for
#: resnet50 on a 2-core EPYC; 6.6 of 35.7 s for the small resnet50 on a 2-core Xeon, its graph from
#: the FX graph cache), while the compiles ahead, side by side, each take a whole compile. A model
#: row in the batch's warm kernel after its first: the 16 s scaled by what the warm kernel left of
#: a row's seconds outside its study on a 2-core Xeon (3.5 of 9.5 s, four torch rows, twice each).
#: The host they come from (cores, GB of memory) plans the exports and compiles side by side where
#: the kind is not on this machine. A TensorRT engine build (ONNX Runtime's provider or TensorRT's
#: API, an empty engine cache) was never timed by this kit: public reports put one model's build
#: at 20 s to several minutes; taken as 60 s (a warm rerun reads the engine cache, a load).
#: Guesses, printed as such.
GUESSES = {
    "cuda": {
        "compile_s": 30.0,
        "load_s": 3.0,
        "notebook_s": 16.0,
        "warm_notebook": 3.5 / 9.5,
        "export_s": 5.0,
        "engine_build_s": 60.0,
        "cached_compile": 0.2,
        "host_cores": 16,
        "host_memory_gb": 128,
    }
}


@dataclass(frozen=True)
class SideBySide:
    """How many exports and torch.compile candidates a batch makes at once before its first job
    (kit.batch.prepare; 0 or 1: none side by side), and on which machine that was planned."""

    exports: int = 1
    compiles: int = 0
    where: str = "here"


def estimate(
    floors: list[JobFloor], kind: str, side: SideBySide = SideBySide()
) -> tuple[float, float] | None:
    """(cold, warm) seconds a run of `floors` will take on `kind`, guessed from GUESSES; None where
    the kind has none. `side`: what the batch makes side by side before its first job.

    >>> estimate([JobFloor(job="r", model="m", windows=2, window_floor_s=2.0, window_limit_s=10.0,
    ...                    searches=2, probes=20, probe_s=20.0, compiles=2)], "cuda")
    (157.0, 30.0)
    """
    g = GUESSES.get(kind)
    if g is None:
        return None
    rounds = math.ceil(len({f.model for f in floors if f.model}) / max(1, side.exports))
    exports = rounds * g["export_s"]
    notebooks = notebook_seconds(floors, g["notebook_s"], g["warm_notebook"])
    cold = (
        sum(f.window_floor_s + f.probe_s + candidate_loads(f, g) for f in floors)
        + compile_seconds(sum(f.compiles for f in floors), side.compiles, g)
        + notebooks
        + exports
    )
    warm = notebooks + sum(
        f.window_floor_s
        + (f.searches * g["compile_s"] * g["cached_compile"] if f.compiles else 0.0)
        for f in floors
    )
    return cold, warm


def candidate_loads(floor: JobFloor, g: dict) -> float:
    """A first run's seconds loading the job's candidates that torch.compile does not compile: a
    TensorRT engine build each where one is built, a load each for the rest.

    >>> candidate_loads(JobFloor(job="r", probes=6, compiles=1, engine_builds=2), GUESSES["cuda"])
    129.0
    """
    loads = floor.probes - floor.compiles - floor.engine_builds
    return loads * g["load_s"] + floor.engine_builds * g["engine_build_s"]


def compile_seconds(compiles: int, at_once: int, g: dict) -> float:
    """A first run's torch.compile seconds: each compile in its search, or, where two or more are
    compiled side by side before the first job (kit.search.ahead), their rounds and then each
    search's compile read from inductor's cache.

    >>> g = GUESSES["cuda"]
    >>> compile_seconds(15, 0, g), compile_seconds(15, 4, g)
    (450.0, 210.0)
    """
    if at_once < 2:
        return compiles * g["compile_s"]
    return math.ceil(compiles / at_once) * g["compile_s"] + compiles * (
        g["compile_s"] * g["cached_compile"]
    )


def notebook_seconds(floors: list[JobFloor], notebook_s: float, warm_share: float) -> float:
    """The seconds the notebooks take outside their studies: each its own kernel, but the jobs in
    the warm kernel after its first only `warm_share` of that.

    >>> notebook_seconds([JobFloor(job="a"), JobFloor(job="b", warm=True),
    ...                   JobFloor(job="c", warm=True)], 16.0, 0.25)
    36.0
    """
    warm = sum(f.warm for f in floors)
    return notebook_s * (len(floors) - max(0, warm - 1)) + notebook_s * warm_share * max(
        0, warm - 1
    )


def estimate_text(floors: list[JobFloor], kind: str, side: SideBySide = SideBySide()) -> str:
    guess = estimate(floors, kind, side)
    if guess is None:
        return ""
    first, again = guess
    kept = sum(f.warm for f in floors)
    kernels = (
        f"the {kept} model row{'s' if kept > 1 else ''} in one warm kernel (after its first, a "
        "row's start taken as the share the warm kernel left on a 2-core Xeon, 3.5 of 9.5 s)"
        if kept
        else "every notebook in a kernel of its own"
    )
    compiles = sum(f.compiles for f in floors)
    ahead = (
        f"the {compiles} torch.compile candidate{'s' if compiles != 1 else ''} compiled "
        f"{side.compiles} at a time before the first job {side.where}"
        if compiles and side.compiles >= 2
        else f"each torch.compile candidate compiled in its own search {side.where}"
        if compiles
        else ""
    )
    builds = sum(f.engine_builds for f in floors)
    engines = (
        f"the {builds} TensorRT engine build{'s' if builds != 1 else ''} taken as "
        f"{GUESSES[kind]['engine_build_s']:g} s each (never timed by this kit)"
        if builds
        else ""
    )
    return (
        "ESTIMATE, not a measurement (per-item costs guessed from one run's time accounts on an "
        f"H200, kit.batch.time_plan.GUESSES): a first run, nothing cached, about {first / 60:.1f} "
        f"min; a rerun on its caches (search decisions, exports and compiled kernels) about "
        f"{again / 60:.1f} min; {kernels}"
        + "".join(f"; {part}" for part in (ahead, engines) if part)
        + "."
    )


def side_by_side(jobs: list[Job], kind: str) -> SideBySide:
    """What a batch of `jobs` makes side by side before its first job: on this machine where the
    kind is here (or GUESSES has no host for it), else on a host like the one GUESSES come from
    (a GPU run planned on a laptop is planned for the GPU host)."""
    g = GUESSES.get(kind)
    compiles = compile_requests(jobs, exported_only=False)
    if g is None or kinds.get(kind).present():
        cores, available, where = None, None, "here"
        device_free = first_gpu_free_bytes() if compiles else None
    else:
        cores, available = int(g["host_cores"]), g["host_memory_gb"] * 1e9
        where = f"on a host like the guesses' ({cores} cores, {g['host_memory_gb']:.0f} GB)"
        device_free = None  # the guesses' host: its GPU taken as empty
    return SideBySide(
        parallel_exports(export_requests(jobs), cores, available),
        parallel_compiles(compiles, cores, available, device_free),
        where,
    )


FLOORS = {
    ResultKind.MODEL_BENCHMARK.notebook: model_floor,
    ResultKind.C2_STUDY.notebook: c2_floor,
    ResultKind.SERVER_SCENARIO.notebook: server_floor,
}


def plan_profile(
    profile: str,
    hardware: str = "auto",
    *,
    only: set[str] | None = None,
    search: bool = True,
    warm: str = "auto",
) -> list[JobFloor]:
    """Each job's windows and probes in `profile` on the kind `hardware` resolves to (`only`: those
    jobs; a row shares its sibling's probes only where the sibling is among them); `warm` (auto,
    on, off) marks the jobs that run in the batch's warm kernel."""
    kind = kinds.resolve(hardware)
    jobs = [j for j in jobs_for(profile, kind, search=search) if only is None or j.name in only]
    measured: dict[tuple[str, int], set[str]] = {}
    return [
        replace(
            FLOORS[j.notebook](j, kind, measured) if j.notebook in FLOORS else JobFloor(job=j.name),
            warm=runs_warm(j, warm),
        )
        for j in jobs
    ]


def gpu_candidates_line(kind: str) -> list[str]:
    """Which optional GPU candidates the plan counted, where the kind is a GPU (none elsewhere)."""
    known = kinds.get(kind)
    if known.hardware_class != "gpu":
        return []
    offered = ", ".join(known.planned_ort_providers()) or "none"
    offered_by = (
        "as this machine offers them"
        if known.present()
        else f"as a {kind} install offers them (no {kind} here)"
    )
    return [
        f"  Candidates {offered_by}: ONNX Runtime GPU providers {offered}; "
        f"TensorRT's Python API {'installed' if tensorrt_python() else 'not installed'}."
    ]


def plan_text(
    floors: list[JobFloor], profile: str, kind: str, side: SideBySide = SideBySide(0)
) -> str:
    """The floors as a table, with the totals and what comes on top (`side`: how many exports and
    compiles the batch makes at once before the first job, kit.batch.prepare)."""
    parallel_exports = side.exports
    head = (
        f"{'job':34} {'windows':>7} {'floor s':>8} {'limit s':>8} {'searches':>8} {'probes':>6} "
        f"{'probe s':>7} {'compiles':>8} {'engines':>7}"
    )
    rows = [
        f"{f.job:34} {f.windows:7d} {f.window_floor_s:8.0f} {f.window_limit_s:8.0f} "
        f"{f.searches:8d} {f.probes:6d} {f.probe_s:7.0f} {f.compiles:8d} {f.engine_builds:7d}"
        + (f"  ({f.note})" if f.note else "")
        for f in floors
    ]
    exports = len({f.model for f in floors if f.model})
    return "\n".join(
        [
            f"The {profile} profile on {kind}, measured in full (no result reused, no search "
            "decision cached):",
            "  windows: timed windows; floor s: their minimum seconds (no measuring run takes "
            "less); limit s: their time limits;",
            "  probes: candidates the searches measure; probe s: their timed seconds if none stops "
            "early (a clear loser stops after a quarter; a failed one is not timed); compiles: "
            "of those, torch.compile candidates; engines: TensorRT engines they build.",
            *gpu_candidates_line(kind),
            head,
            *rows,
            f"{'total':34} {sum(f.windows for f in floors):7d} "
            f"{sum(f.window_floor_s for f in floors):8.0f} "
            f"{sum(f.window_limit_s for f in floors):8.0f} {sum(f.searches for f in floors):8d} "
            f"{sum(f.probes for f in floors):6d} {sum(f.probe_s for f in floors):7.0f} "
            f"{sum(f.compiles for f in floors):8d} {sum(f.engine_builds for f in floors):7d}",
            f"On top: {exports} ONNX export{'s' if exports != 1 else ''} (cached after the first "
            f"run; {f'made {parallel_exports} at a time before the first job {side.where}' if parallel_exports > 1 else f'each job exports its own, one after another {side.where}'}), loading and "  # noqa: E501
            "compiling each candidate (the torch.compile ones for tens of seconds on a GPU), "
            "warm-up calls, the reference outputs, the accuracy check, the roofline's bandwidth "
            "measurement. A window whose interval is still wide at its limit goes on to "
            f"{HARD_LIMIT}x that until it has 3 rounds.",
            *([guess] if (guess := estimate_text(floors, kind, side)) else []),
        ]
    )
