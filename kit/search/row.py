"""The per-row search: measure the candidates this hardware offers for one published row, keep the
fastest whose precision class fits the row and whose numerics stay within tolerance of the fp32
reference, and cache the decision with its probe table.

Candidates are measured one at a time (one session in memory besides the reference outputs), each
through the kit's own timed window. The configuration the published-precision mapping picks
("today's mapping") is always measured, so every decision states its ratio to it; a faster candidate
replaces it only when the candidate's whole 95 % interval lies above today's throughput (a search
never trades the mapping for noise).

The jobs are split by module: planning (kit.search.planning), measuring (kit.search.measuring),
choosing (kit.search.choice) and wording the note (kit.search.wording); this module runs them in
order for one row and caches the decision.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from dataclasses import asdict, replace

from kit.backends.onnx_conversion import quantization_method
from kit.hardware import kinds
from kit.hardware.environment import usable_cores
from kit.measure.noise import idle_sample
from kit.models.spec import ExportedModel
from kit.precision import PublishedPrecision
from kit.results.windows import Noise
from kit.search import cache, runoff, sharing
from kit.search.candidates import RowCandidate, row_candidates
from kit.search.choice import choose
from kit.search.context import SearchContext
from kit.search.decision import Decision
from kit.search.gate import row_bits
from kit.search.keeping import KEEPS_NOTHING, SessionKeeper
from kit.search.measuring import measure_all
from kit.search.planning import (
    SearchSettings,
    row_probes,
    skip_failed_before,
    skip_over_memory_budget,
)
from kit.search.precision_map import PrecisionChoice, map_precision


def decide(
    model: ExportedModel,
    published: str,
    batch_size: int,
    kind: str,
    settings: SearchSettings,
    *,
    weights: str = "random",
    seed: int = 0,
    candidates: list[RowCandidate] | None = None,
    prior: Decision | None = None,
    keeper: SessionKeeper = KEEPS_NOTHING,
) -> tuple[Decision, bool]:
    """The row's decision: from the cache when one fits (returned with True), else searched now and
    stored (False). `prior`: the row's decision at a smaller batch just before, whose failed
    candidates are not probed again (kit.search.planning.skip_failed_before). `keeper`: where the
    chosen candidate would be compiled again to load it (torch.compile), its session stays open
    there for the row's measurement (kit.search.keeping). It enters here because it outlives the
    search (the caller takes the session when it measures); inside, the context holds it."""
    key = cache.decision_key(
        model.name, published, batch_size, kind, weights=weights, small=model.small, seed=seed
    )
    stored = (
        None
        if settings.force
        else cache.load_decision(key, settings.depth, settle_batch=settings.settle_batch)
    )
    if stored is not None:
        return stored, True
    decision = search_row(
        model,
        published,
        batch_size,
        kind,
        settings,
        candidates=candidates,
        seed=seed,
        weights=weights,
        prior=prior,
        keeper=keeper,
    )
    decision.key, decision.cache_file = key, cache.decision_path(key).name
    cache.store_decision(decision)
    return decision, False


def today_plan(
    model: ExportedModel, published: str, kind: str, gpu_providers: list[str] | None = None
) -> PrecisionChoice:
    providers = kinds.get(kind).ort_providers() if gpu_providers is None else gpu_providers
    return map_precision(published, kind, framework=model.framework, gpu_providers=providers)


def _sibling(
    model: ExportedModel,
    published: str,
    batch_size: int,
    kind: str,
    settings: SearchSettings,
    weights: str,
    seed: int,
) -> Decision | None:
    """The sibling row's cached decision this search may borrow probes from (kit.search.sharing)."""
    return sharing.sibling_decision(
        model,
        published,
        batch_size,
        kind,
        settings.depth,
        settings.measure_config().to_dict(),
        weights=weights,
        seed=seed,
    )


def search_row(
    model: ExportedModel,
    published: str,
    batch_size: int,
    kind: str,
    settings: SearchSettings,
    *,
    candidates: list[RowCandidate] | None = None,
    seed: int = 0,
    weights: str = "random",
    prior: Decision | None = None,
    keeper: SessionKeeper = KEEPS_NOTHING,
) -> Decision:
    """Measure every candidate for the row (or take its figures from the sibling row's search,
    kit.search.sharing) and choose; returns the decision (not cached)."""
    started, load_before = time.perf_counter(), os.getloadavg()[0]
    # other processes' load and steal now: how far single probes can be trusted
    machine = idle_sample()
    # TensorRT, where a session really starts it (FP8 -> int8)
    providers = kinds.get(kind).ort_providers()
    today = today_plan(model, published, kind, providers)
    if candidates is None:  # reading the graph for the int8 method only where an 8-bit row needs it
        int8 = quantization_method(model) if row_bits(published) == 8 else None
        candidates = row_candidates(model.framework, kind, providers=providers, int8_method=int8)
    probes, native16 = row_probes(candidates, today, published, settings.depth)
    skip_over_memory_budget(probes, model)
    skip_failed_before(probes, prior)
    sibling = (
        None
        if machine.noisy or settings.force
        else _sibling(model, published, batch_size, kind, settings, weights, seed)
    )
    shared = sharing.borrow(probes, sibling, published) if sibling else 0
    ctx = SearchContext(
        model=model,
        inputs=model.make_inputs(batch_size, seed=seed),
        batch=batch_size,
        window=settings.measure_config(),
        keeper=keeper,
    )
    measure_all(ctx, probes, quiet=not machine.noisy)
    verdict = runoff.run(
        ctx,
        probes,
        within=runoff.window(contended=machine.noisy),
        settle_batch=settings.settle_batch,
        seed=seed,
    )
    load = (load_before + os.getloadavg()[0]) / 2  # the 1-minute load average, start and end
    chosen = choose(probes, published, today, verdict)
    keeper.keep_only(batch_size, None if chosen.fallback else chosen.chosen)
    return replace(
        chosen,
        runoff=verdict,
        model=model.name,
        published=PublishedPrecision.parse(published),
        batch_size=batch_size,
        kind=kind,
        depth=settings.depth,
        settings={**asdict(settings), "probe": settings.measure_config().to_dict()},
        native_16bit=list(native16),
        searched_s=round(time.perf_counter() - started, 1),
        shared_probes=shared,
        shared_from=sibling.cache_file if sibling else None,
        # the verdict and what decided it; the sample's other figures stay out of the cache
        machine_at_start=Noise(
            noisy=machine.noisy,
            reasons=machine.reasons,
            other_load=machine.other_load,
            steal_share=machine.steal_share,
        ),
        load_average=round(load, 2),
        cores=usable_cores(),
        # others' load or steal in the idle moment before it (the load average counts the search's
        # own threads)
        contended=machine.noisy,
        created_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    )
