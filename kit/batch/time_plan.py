"""What a profile costs before it runs: each job's time floor, from its own parameters.

A floor, not a forecast: the seconds no run of the job can go below (each timed window's minimum
duration, raised to what the kind's power sensor resolves; each search probe's minimum), with the
counts a run adds to it (windows, searches, probes, torch.compile candidates, exports), and each
window's time limit (what one window may take when its interval stays wide). `kit reproduce
--plan` prints it; a run's result then says where its seconds went (kit.measure.time_account).

>>> floors = plan_profile("quick", "cpu")
>>> floors[0].job, floors[0].window_floor_s
('published_results', 0.0)
"""

from __future__ import annotations

from dataclasses import dataclass

from kit.batch import Job
from kit.batch.profiles import C2_MODEL, jobs_for
from kit.hardware import kinds
from kit.measure.power import SAMPLERS, SENSORS
from kit.measure.window import HARD_LIMIT, time_limit
from kit.models import get_entry
from kit.search.candidates import native_16bit, row_candidates, tensorrt_python
from kit.search.planning import PROBE_DEFAULTS, plan_probes, to_probe
from kit.search.precision_map import map_precision
from kit.studies import c2


@dataclass(frozen=True)
class JobFloor:
    """One job's time floor and the counts behind it."""

    job: str
    model: str = ""  # the model it exports (each distinct one once)
    windows: int = 0  # timed windows at the job's own settings
    window_floor_s: float = 0.0  # their minimum durations (raised to the power sensor's window)
    window_limit_s: float = 0.0  # their time limits (a window whose interval stays wide stops there)
    searches: int = 0  # search batches (a GPU searches at every published batch)
    probes: int = 0  # candidates measured across those searches (at most: clear losers stop early)
    probe_floor_s: float = 0.0
    compiles: int = 0  # of those probes, torch.compile candidates (tens of seconds each on a GPU)
    note: str = ""

    @property
    def floor_s(self) -> float:
        return self.window_floor_s + self.probe_floor_s

    def to_dict(self) -> dict:
        return {**{k: getattr(self, k) for k in self.__dataclass_fields__}, "floor_s": self.floor_s}


def sensor_window_s(kind: str) -> float:
    """The shortest window the kind's first power sensor resolves (NVML: 10 s; RAPL: none)."""
    names = SENSORS[kind].samplers if kind in SENSORS else ()
    return max((SAMPLERS.get(n).min_window_s for n in names), default=0.0)


def windows(batches: int, min_s: float, max_s: float, kind: str, power: bool = True) -> tuple[float, float]:
    """(floor, limit) of `batches` timed windows of at least `min_s`, at most `max_s` each; `power`:
    each lengthened to the kind's power sensor window (kit.measure.window.power_resolved)."""
    least = max(min_s, sensor_window_s(kind)) if power else min_s
    return batches * least, batches * max(time_limit(min_s, max_s), least)


def search_probes(model: str, published: str, kind: str, depth: str) -> dict[str, bool]:
    """The candidates one search of the row measures at `depth`: label -> whether torch.compile."""
    framework, providers = get_entry(model).framework, kinds.get(kind).ort_providers()
    candidates = row_candidates(framework, kind, providers=providers)
    today = map_precision(published, kind, framework=framework, gpu_providers=providers)
    probes = [to_probe(c, today) for c in candidates]
    plan_probes(probes, candidates, published, native_16bit(candidates), depth)
    return {p.label: bool(p.options.get("compile")) for p in probes if p.status == "pending"}


def search_batches(p: dict) -> list[int]:
    """The batches a model job searches at: every published one (search_each_batch) or one."""
    return [p["search_batch"]] if "search_batch" in p else list(p["batch_sizes"])


def model_floor(job: Job, kind: str, measured: dict[tuple[str, int], set[str]]) -> JobFloor:
    """`measured`: the candidates earlier rows of the same model measured at each batch, which this
    row's search takes from them (kit.search.sharing: the FP8 row after its FP16 row)."""
    p = job.parameters
    floor, limit = windows(len(p["batch_sizes"]), p["min_duration_s"], p["max_duration_s"], kind,
                           power=p.get("stretch_for_power", True))
    if not p.get("search"):
        return JobFloor(job.name, p["model"], len(p["batch_sizes"]), floor, limit, note="published settings, no search")
    own = search_probes(p["model"], p["published_precision"], kind, p["search_depth"])
    probes = compiles = 0
    for batch in search_batches(p):
        before = measured.setdefault((p["model"], batch), set())
        new = [label for label in own if label not in before]
        probes, compiles = probes + len(new), compiles + sum(own[label] for label in new)
        before.update(new)
    probe_s = PROBE_DEFAULTS[p["search_depth"]][0]
    return JobFloor(job.name, p["model"], len(p["batch_sizes"]), floor, limit, len(search_batches(p)), probes,
                    probes * probe_s, compiles)


def c2_floor(job: Job, kind: str, measured: dict) -> JobFloor:
    p = job.parameters
    batches = len(c2.Config.batch_sizes)
    floor, limit = windows(batches, p["min_duration_s"], p["max_duration_s"], kind)
    return JobFloor(job.name, C2_MODEL, batches, floor, limit)


def server_floor(job: Job, kind: str, measured: dict) -> JobFloor:
    p = job.parameters
    runs = len(p["policies"]) * p["max_probes"]  # at most: each policy's probes of the load
    floor, limit = windows(len(p["policies"]), p["min_duration_s"], p["max_duration_s"], kind, power=False)
    return JobFloor(job.name, p["model"], len(p["policies"]), floor, limit * p["max_probes"],
                    note=f"up to {runs} windows (probes of the load per policy); the floor counts one per policy")


FLOORS = {"model_benchmark.ipynb": model_floor, "c2_study.ipynb": c2_floor, "server_scenario.ipynb": server_floor}


def plan_profile(profile: str, hardware: str = "auto", *, only: set[str] | None = None,
                 search: bool = True) -> list[JobFloor]:
    """Each job's floor in `profile` on the kind `hardware` resolves to (`only`: those jobs)."""
    kind = kinds.resolve(hardware)
    jobs = [j for j in jobs_for(profile, kind, search=search) if only is None or j.name in only]
    measured: dict[tuple[str, int], set[str]] = {}
    return [FLOORS[j.notebook](j, kind, measured) if j.notebook in FLOORS else JobFloor(j.name) for j in jobs]


def plan_text(floors: list[JobFloor], profile: str, kind: str) -> str:
    """The floors as a table, with the totals and what they leave out."""
    head = f"{'job':38} {'windows':>7} {'floor s':>8} {'limit s':>8} {'searches':>8} {'probes':>6} {'compiles':>8}"
    rows = [f"{f.job:38} {f.windows:7d} {f.floor_s:8.0f} {f.window_limit_s:8.0f} {f.searches:8d} {f.probes:6d} "
            f"{f.compiles:8d}" + (f"  ({f.note})" if f.note else "") for f in floors]
    total = sum(f.floor_s for f in floors)
    limit = sum(f.window_limit_s for f in floors)
    compiles = sum(f.compiles for f in floors)
    exports = len({f.model for f in floors if f.model})
    offered = ", ".join(kinds.get(kind).ort_providers()) or "none"
    return "\n".join([
        f"Time floor of the {profile} profile on {kind} (seconds no run can go below; not a forecast):",
        f"(search candidates as this machine offers them: ONNX Runtime GPU providers {offered}; "
        f"TensorRT's Python API {'installed' if tensorrt_python() else 'not installed'})",
        head, *rows,
        f"{'total':38} {sum(f.windows for f in floors):7d} {total:8.0f} {limit:8.0f}",
        f"Not in the floor: {exports} ONNX exports (cached after the first run), loading and compiling each "
        f"probe ({compiles} torch.compile candidates), warm-up calls, the reference outputs. A window runs "
        f"past its floor until its interval is narrow enough, up to its limit ({HARD_LIMIT}x that while "
        "it has fewer than 3 rounds)."])
