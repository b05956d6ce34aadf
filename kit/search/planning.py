"""Planning a row's search: how hard to search (`SearchSettings`), each candidate as a probe, and
which probes will not be measured, with why (the precision-class gate, the search's depth, emulated
16-bit types in a quick search, a calibration over the memory budget).

>>> SearchSettings("quick").measure_config().min_duration_s
1.0
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from pathlib import Path

from kit.errors import InvalidParameter
from kit.hardware import kinds
from kit.measure.memory import GB, conversion_budget, estimate_need
from kit.measure.window import MeasureConfig
from kit.models import get_entry
from kit.models.spec import ExportedModel
from kit.search.candidates import DEPTHS, RowCandidate, native_16bit, row_candidates
from kit.search.decision import Decision
from kit.search.gate import bits, precision_gate
from kit.search.precision_map import PrecisionChoice, map_precision
from kit.search.probe import Probe, ProbeStatus

PROBE_DEFAULTS = {"quick": (1.0, 3), "full": (3.0, 10)}  # seconds and calls per candidate
FULL_ONLY_WHY = "torch.compile / extra settings take minutes here"


@dataclass(frozen=True)
class SearchSettings:
    """How hard to search: `depth` ('quick': short probes, no torch.compile; 'full': every
    candidate, longer probes), probe length, `warmup` (calls before each timed window besides the
    numerics call that every candidate makes first, which already warms it up), `force` (search even
    when a decision is cached), `settle_batch` (the row's largest published batch: a near tie at a
    smaller search batch is settled there where it fits, kit.search.runoff)."""

    depth: str = "quick"
    _: KW_ONLY
    probe_s: float | None = None
    min_count: int | None = None
    warmup: int = 0
    force: bool = False
    settle_batch: int | None = None

    def __post_init__(self) -> None:
        if self.depth not in DEPTHS:
            raise InvalidParameter("search_depth", self.depth, f"one of {', '.join(DEPTHS)}")
        if self.probe_s is not None and not 0 < self.probe_s < 3600:
            raise InvalidParameter("probe_s", self.probe_s, "seconds, > 0")
        if self.min_count is not None and self.min_count < 2:
            raise InvalidParameter(
                "min_count", self.min_count, ">= 2 (an interval needs two calls)"
            )
        if self.settle_batch is not None and self.settle_batch < 1:
            raise InvalidParameter("settle_batch", self.settle_batch, "a batch size >= 1 (or none)")

    def measure_config(self) -> MeasureConfig:
        seconds, count = PROBE_DEFAULTS[self.depth]
        return MeasureConfig(
            warmup=self.warmup,
            min_duration_s=self.probe_s or seconds,
            min_count=self.min_count or count,
        )


def to_probe(c: RowCandidate, today: PrecisionChoice) -> Probe:
    placement = c.placement
    return Probe(
        label=placement.label,
        placement=placement,
        native=c.native,
        why=c.why,
        today=placement == today.placement,
        fallback_for=c.fallback_for,
    )


def row_probes(
    candidates: list[RowCandidate], today: PrecisionChoice, published: str, depth: str
) -> tuple[list[Probe], tuple[str, ...]]:
    """Each candidate as a probe (today's mapping added where no candidate is it), marked by
    `plan_probes`, and the native 16-bit types: what a row's search measures, and what
    `kit reproduce --plan` counts."""
    candidates = list(candidates)
    if not any(c.placement == today.placement for c in candidates):
        candidates.insert(0, RowCandidate(today.placement, why="today's mapping"))
    native16 = native_16bit(candidates)
    probes = [to_probe(c, today) for c in candidates]
    plan_probes(probes, candidates, published, native16, depth)
    return probes, native16


def planned_probes(
    model: str, published: str, kind: str, depth: str, providers: list[str] | None = None
) -> list[Probe]:
    """The probes a search of zoo model `model`'s row plans on `kind` at `depth`, from the names
    alone, before any export (what `kit reproduce --plan` counts and kit.search.ahead compiles
    ahead), with the optional ONNX Runtime `providers` (default: those here); the search itself
    also reads an 8-bit row's graph for its int8 method, which changes its int8 candidates only."""
    framework = get_entry(model).framework
    providers = kinds.get(kind).ort_providers() if providers is None else providers
    today = map_precision(published, kind, framework=framework, gpu_providers=providers)
    probes, _ = row_probes(
        row_candidates(framework, kind, providers=providers), today, published, depth
    )
    return probes


def skip_over_memory_budget(probes: list[Probe], model: ExportedModel) -> None:
    """An explicitly asked static int8 whose calibration would need more than the conversion budget
    (3 x the ONNX file + 2 GB) is not probed: Swin-L's needs about 6.6 GB against 4.4."""
    size = Path(model.onnx_path).stat().st_size
    budget = conversion_budget(size)
    for p in probes:
        if p.status == ProbeStatus.PENDING and p.placement.options.static_int8:
            need = estimate_need("int8-static", size)
            if need > budget:
                p.status, p.reason = (
                    ProbeStatus.NOT_PROBED,
                    (
                        f"static int8 calibration needs about {need / GB:.1f} GB, "
                        f"over the {budget / GB:.1f} GB conversion budget"
                    ),
                )


def plan_probes(
    probes: list[Probe],
    candidates: list[RowCandidate],
    published: str,
    native16: tuple[str, ...],
    depth: str,
) -> None:
    """Mark what will not be measured, and why: the precision-class gate, then the depth."""
    for p, c in zip(probes, candidates, strict=True):
        reason = precision_gate(p.placement.precision, published)
        if reason:
            p.status, p.reason = ProbeStatus.NOT_ELIGIBLE, reason
        elif p.today:
            p.status = ProbeStatus.PENDING
        elif depth == "quick" and c.fallback_for:
            p.status = ProbeStatus.FALLBACK  # settled once the one it stands in for is measured
        elif depth == "quick" and c.depth == "full":
            p.status, p.reason = (
                ProbeStatus.NOT_PROBED,
                f"full search only ({c.full_only_why or FULL_ONLY_WHY})",
            )
        elif depth == "quick" and bits(p.placement.precision) == 16 and not p.native:
            p.status, p.reason = (
                ProbeStatus.NOT_PROBED,
                emulated_why(p.placement.precision, native16),
            )
        else:
            p.status = ProbeStatus.PENDING


def emulated_why(precision: str, native16: tuple[str, ...]) -> str:
    """Why a quick search leaves an emulated 16-bit type out: its arithmetic is fp32 with
    conversions around it, so it trails fp32 (which every FP16 and FP8 row may run at) or the native
    16-bit type. On a Xeon with neither avx512_bf16 nor avx512_fp16, emulated types ran 0.02-0.92x
    the fastest fp32 on resnet50 and Swin-L and took 105 of Swin-L's 135 s search
    (docs/backends.md)."""
    than = (
        f"native {'/'.join(native16)}" if native16 else "fp32, which any FP16 or FP8 row may run at"
    )
    return (
        f"emulated {precision} (fp32 arithmetic with conversions around it) is slower than {than} "
        "(a full search measures it)"
    )


def skip_failed_before(probes: list[Probe], prior: Decision | None) -> None:
    """Where the row was searched at a smaller batch just before (a GPU decides at each published
    batch), a candidate that failed to load or failed the numerics gate there is not probed again:
    a larger batch needs more memory, and a graph's numerics do not depend on the batch. Today's
    mapping is always measured."""
    if prior is None:
        return
    failed = {
        q.label: q
        for q in prior.probes
        if q.status in (ProbeStatus.FAILED, ProbeStatus.FAILED_NUMERICS)
    }
    for p in probes:
        q = failed.get(p.label)
        if p.status == ProbeStatus.PENDING and not p.today and q is not None:
            p.status, p.reason = (
                ProbeStatus.NOT_PROBED,
                f"{q.status} at batch {prior.batch_size}: {q.reason}",
            )
