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
from kit.batch.profiles import C2_MODEL, jobs_for
from kit.hardware import kinds
from kit.measure.power import SAMPLERS, SENSORS
from kit.measure.window import HARD_LIMIT, MeasureConfig, power_resolved, time_limit
from kit.models import get_entry
from kit.search.candidates import row_candidates, tensorrt_python
from kit.search.planning import PROBE_DEFAULTS, row_probes
from kit.search.precision_map import map_precision
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
    warm: bool = False  # runs in the batch's warm kernel (kit.batch.jobs.runs_warm)
    note: str = ""

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True)
class PlannedProbe:
    """A candidate one search of the row measures."""

    compiles: bool
    shareable: bool  # may take the sibling row's figures (kit.search.sharing)


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
    framework, providers = get_entry(model).framework, kinds.get(kind).ort_providers()
    today = map_precision(published, kind, framework=framework, gpu_providers=providers)
    probes, _ = row_probes(
        row_candidates(framework, kind, providers=providers), today, published, depth
    )
    return {
        p.label: PlannedProbe(p.placement.options.compiles, shareable(p))
        for p in probes
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
    probes = compiles = 0
    for batch in search_batches(p):
        before = measured.setdefault((p["model"], batch), set())
        new = [label for label, probe in own.items() if not (probe.shareable and label in before)]
        probes, compiles = probes + len(new), compiles + sum(own[label].compiles for label in new)
        before.update(own)
    probe_s = PROBE_DEFAULTS[p["search_depth"]][0]
    return JobFloor(
        job=job.name,
        model=p["model"],
        windows=len(p["batch_sizes"]),
        window_floor_s=floor,
        window_limit_s=limit,
        searches=len(search_batches(p)),
        probes=probes,
        probe_s=probes * probe_s,
        compiles=compiles,
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
#: each searched batch again from the kernel cache, about a fifth. A model row in the batch's warm
#: kernel after its first: the 16 s scaled by what the warm kernel left of a row's seconds outside
#: its study on a 2-core Xeon (3.5 of 9.5 s, four torch rows, twice each). Guesses, printed as such.
GUESSES = {
    "cuda": {
        "compile_s": 30.0,
        "load_s": 3.0,
        "notebook_s": 16.0,
        "warm_notebook": 3.5 / 9.5,
        "export_s": 5.0,
        "cached_compile": 0.2,
    }
}


def estimate(
    floors: list[JobFloor], kind: str, parallel_exports: int = 1
) -> tuple[float, float] | None:
    """(cold, warm) seconds a run of `floors` will take on `kind`, guessed from GUESSES; None where
    the kind has none. `parallel_exports`: how many exports the batch makes at once before its first
    job (kit.batch.prepare; 0 or 1: one after another).

    >>> estimate([JobFloor(job="r", model="m", windows=2, window_floor_s=2.0, window_limit_s=10.0,
    ...                    searches=2, probes=20, probe_s=20.0, compiles=2)], "cuda")
    (157.0, 30.0)
    """
    g = GUESSES.get(kind)
    if g is None:
        return None
    rounds = math.ceil(len({f.model for f in floors if f.model}) / max(1, parallel_exports))
    exports = rounds * g["export_s"]
    notebooks = notebook_seconds(floors, g["notebook_s"], g["warm_notebook"])
    cold = (
        sum(
            f.window_floor_s
            + f.probe_s
            + f.compiles * g["compile_s"]
            + (f.probes - f.compiles) * g["load_s"]
            for f in floors
        )
        + notebooks
        + exports
    )
    warm = notebooks + sum(
        f.window_floor_s
        + (f.searches * g["compile_s"] * g["cached_compile"] if f.compiles else 0.0)
        for f in floors
    )
    return cold, warm


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


def estimate_text(floors: list[JobFloor], kind: str, parallel_exports: int = 1) -> str:
    guess = estimate(floors, kind, parallel_exports)
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
    return (
        "ESTIMATE, not a measurement (per-item costs guessed from one run's time accounts on an "
        f"H200, kit.batch.time_plan.GUESSES): a first run, nothing cached, about {first / 60:.1f} "
        f"min; a rerun on its caches (search decisions, exports and compiled kernels) about "
        f"{again / 60:.1f} min; {kernels}."
    )


FLOORS = {
    "model_benchmark.ipynb": model_floor,
    "c2_study.ipynb": c2_floor,
    "server_scenario.ipynb": server_floor,
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


def plan_text(floors: list[JobFloor], profile: str, kind: str, parallel_exports: int = 0) -> str:
    """The floors as a table, with the totals and what comes on top (`parallel_exports`: how many
    exports this machine makes at once before the first job, kit.batch.prepare)."""
    offered = ", ".join(kinds.get(kind).ort_providers()) or "none"
    head = (
        f"{'job':34} {'windows':>7} {'floor s':>8} {'limit s':>8} {'searches':>8} {'probes':>6} "
        f"{'probe s':>7} {'compiles':>8}"
    )
    rows = [
        f"{f.job:34} {f.windows:7d} {f.window_floor_s:8.0f} {f.window_limit_s:8.0f} "
        f"{f.searches:8d} {f.probes:6d} {f.probe_s:7.0f} {f.compiles:8d}"
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
            "early (a clear loser stops after a quarter; a failed one is not timed).",
            f"  Candidates as this machine offers them: ONNX Runtime GPU providers {offered}; "
            f"TensorRT's Python API {'installed' if tensorrt_python() else 'not installed'}.",
            head,
            *rows,
            f"{'total':34} {sum(f.windows for f in floors):7d} "
            f"{sum(f.window_floor_s for f in floors):8.0f} "
            f"{sum(f.window_limit_s for f in floors):8.0f} {sum(f.searches for f in floors):8d} "
            f"{sum(f.probes for f in floors):6d} {sum(f.probe_s for f in floors):7.0f} "
            f"{sum(f.compiles for f in floors):8d}",
            f"On top: {exports} ONNX export{'s' if exports != 1 else ''} (cached after the first "
            f"run; {f'here made {parallel_exports} at a time before the first job' if parallel_exports > 1 else 'each job exports its own, one after another here'}), loading and "  # noqa: E501
            "compiling each candidate (the torch.compile ones for tens of seconds on a GPU), "
            "warm-up calls, the reference outputs, the accuracy check, the roofline's bandwidth "
            "measurement. A window whose interval is still wide at its limit goes on to "
            f"{HARD_LIMIT}x that until it has 3 rounds.",
            *([guess] if (guess := estimate_text(floors, kind, parallel_exports)) else []),
        ]
    )
