"""What `make reproduce` runs: the jobs of each profile on one kind of hardware.

The hardware is resolved once (`kit.hardware.kinds.resolve`), and each published row's precision
plan (backend, precision, device and the reason, from `kit.search.precision_map`) travels whole into
the job's parameters: no later step works it out again.
"""

from __future__ import annotations

from pathlib import Path

from kit.backends.ipu.settings import plan_for
from kit.backends.ipu.worker_process import request_timeout_s
from kit.batch import Job
from kit.errors import InvalidParameter
from kit.hardware import kinds as hw
from kit.measure.bytemlperf import BYTEMLPERF_TRIM
from kit.models import get_entry
from kit.paths import cache_dir
from kit.precision import PublishedPrecision
from kit.published import figures as published
from kit.results import ResultKind
from kit.search import decision_key, key_hash
from kit.search.precision_map import PrecisionChoice, map_precision

PROFILES = ("quick", "full")

# Every profile measures every batch size the published reports give for a row (the figures the
# scorecard sets side by side). The quick profile searches each row's configuration at a small
# batch size (below), so the search stays cheap on 2 cores; full searches at the largest published
# one. Roformer at batch 1 (2.4 s a call at batch 2 on 2 cores, 1.3 s at 1). Videobert stays at its
# smallest published batch, 4: each call encodes its 100 class prompts whatever the batch, so batch
# 1 costs as much per call (about 3.9 s in ONNX Runtime fp32) for a quarter of the images. Widedeep
# searches at its published 20000 (a call there takes about 0.3 s): at 1024 ONNX Runtime and
# OpenVINO f32 swapped places between searches (1.09x either way), while at 20000 OpenVINO ran 1.28x
# in the peer benchmark and 1.5x in two searches of 4.2-4.4 s.
QUICK_SEARCH_BATCH = {
    "resnet50-torch-fp32": 4,
    "swin-large-torch-fp32": 1,
    "clip-onnx-fp32": 4,
    "conformer-encoder-onnx-fp32": 4,
    "videobert-onnx-fp32": 4,
    "roformer-tf-fp32": 1,
    "widedeep-tf-fp32": 20000,
    "albert-torch-fp32": 1,
    "bert-torch-fp32": 1,
    "roberta-torch-fp32": 1,
    "deberta-torch-fp32": 1,
}
# On the IPU every profile keeps the published clients and enough calls for ByteMLPerf's trim.
IPU_MIN_COUNT = 2 * BYTEMLPERF_TRIM + 3
# target_ci: the throughput's 95 % half-width to reach (5 % quick, 2 % full); max_duration_s: the
# time limit per batch size when it is not reached (the result says which stopped it). The quick
# profile keeps its short windows where the power sensor needs longer ones (NVML: 10 s, which took
# 19 windows on a GPU from 1-5 s to 10 s each: kit reproduce --plan), its power labelled indicative;
# the full profile, and the C2 study whose efficiency is a published figure, lengthen them.
TIMING = {
    "quick": {
        "warmup": 1,
        "min_duration_s": 1.0,
        "min_count": 3,
        "data_percent": 10.0,
        "target_ci": 0.05,
        "max_duration_s": 5.0,
        "stretch_for_power": False,
    },
    "full": {
        "warmup": 5,
        "min_duration_s": 10.0,
        "min_count": 100,
        "data_percent": 100.0,
        "target_ci": 0.02,
        "max_duration_s": 120.0,
    },
}
SERVER = {
    "quick": {
        "policies": [[1, 0.0], [4, 20.0]],
        "min_duration_s": 2.0,
        "max_duration_s": 8.0,
        "max_probes": 3,
        "fixed_batch_duration_s": 1.0,
    },
    "full": {
        "policies": [[1, 0.0], [2, 10.0], [4, 20.0], [8, 40.0]],
        "min_duration_s": 60.0,
        "min_query_count": 500,
        "max_duration_s": 300.0,
        "max_probes": 8,
        "fixed_batch_duration_s": 10.0,
    },
}
# a model job's time limit, before any compilation it still has to do
JOB_LIMIT_S = {"quick": 900, "full": 3600}
SERVER_MODEL = "resnet50-torch-fp32"
C2_MODEL = "resnext101-c2"


def row_plan(model: str, published_precision: str, kind: str) -> PrecisionChoice:
    """Backend, precision, device and the reason, standing in for a published precision on `kind`.

    On a GPU, TensorRT is offered to the mapping only where an ONNX Runtime session really starts
    it here (the kind's `ort_providers`), so the FP8 rows can reach int8 through
    TensorRT.
    """
    return map_precision(
        published_precision,
        kind,
        framework=get_entry(model).framework,
        gpu_providers=hw.get(kind).ort_providers(),
    )


def plan_params(plan: PrecisionChoice, kind: str) -> dict:
    """A job's precision plan and the hardware kind it runs on, settled here once."""
    at = plan.placement
    return {
        "hardware": kind,
        "backend": at.backend,
        "precision": at.precision,
        "device": at.device,
        "precision_note": plan.note,
    }


def search_key(model: str, published_precision: str, batch: int, kind: str) -> str:
    """The key of the row's search decision (model, precision, batch, hardware, software): the job
    makes or reuses the decision itself (kit.search.decide); the key in its parameters makes a new
    key (other hardware or software) a new job."""
    return key_hash(decision_key(model, published_precision, batch, kind))


def search_keys(model: str, published_precision: str, batches: list[int], kind: str) -> str:
    """The keys of the row's decisions at each of `batches`, comma-separated in their order (a GPU
    decides at every published batch: kit.hardware.kinds' `search_each_batch`)."""
    return ",".join(search_key(model, published_precision, b, kind) for b in batches)


def search_batch(model: str, batches: list[int], profile: str) -> int:
    """The batch size a row's search measures its candidates at: the largest published one (full),
    a small one (quick)."""
    return (
        max(batches) if profile == "full" else min(QUICK_SEARCH_BATCH.get(model, 1), max(batches))
    )


def search_params(
    model: str, published_precision: str, batches: list[int], profile: str, kind: str
) -> dict:
    """Where a row's search measures and the key(s) of its decision(s): at every published batch
    where calls take milliseconds (a GPU), else at one batch (`search_batch`)."""
    if hw.get(kind).search_each_batch:
        return {"search_key": search_keys(model, published_precision, batches, kind)}
    searched = search_batch(model, batches, profile)
    return {
        "search_batch": searched,
        "search_key": search_key(model, published_precision, searched, kind),
    }


def fp16_first(rows: list) -> list:
    """The table's rows (named tuples) in its model order, each model's FP16 row before its FP8 one:
    the FP8 row's search (int8 calibrations: the costly one) then takes the FP16 row's probes
    (kit.search.sharing)."""
    first_seen: dict[str, int] = {}
    for r in rows:
        first_seen.setdefault(r.model, len(first_seen))
    return sorted(rows, key=lambda r: (first_seen[r.model], r.precision != PublishedPrecision.FP16))


def compiled_batches(model: str, precision: str, batches: list[int]) -> list[int]:
    """The batch sizes an IPU row's job compiles: its pack batch where it runs packed (as the
    backend loads it), else each of its batch sizes."""
    plan = plan_for(model, precision)
    if plan and plan.pack and not plan.missing_passes:
        return [int(plan.pack["batch_size"])]
    return sorted(set(batches))


def uncached_compilations(
    model: str, precision: str, batches: list[int], popef_dir: Path | None = None
) -> list[int]:
    """Those of `compiled_batches` with no PopEF of this model, precision and batch size in the
    PopEF cache (named `<model>-<export key>-<precision>-bs<batch>-<key>.popef` by the worker). A
    PopEF for another PopRT version or other options counts as cached: that compilation then has the
    job's own limit, and the worker's load timeout, to finish in."""
    folder = popef_dir or cache_dir() / "popef"
    return [
        b
        for b in compiled_batches(model, precision, batches)
        if not any(folder.glob(f"{model}-{'?' * 12}-{precision}-bs{b}-*.popef"))
    ]


def model_job_limit_s(profile: str, params: dict, published_settings: bool) -> int:
    """A model job's time limit: the profile's, plus, where the row runs its published settings (the
    IPU, whose PopRT compiles each batch size for minutes before anything is timed), one load
    timeout (KIT_IPU_LOAD_TIMEOUT_S) per compilation still to do, so that a first run is not cut
    mid-compile.

    >>> model_job_limit_s("quick", {}, False)
    900
    """
    base = JOB_LIMIT_S[profile]
    if not published_settings:
        return base
    todo = uncached_compilations(params["model"], params["precision"], params["batch_sizes"])
    return base + int(len(todo) * request_timeout_s("load"))


def model_jobs(profile: str, kind: str, research: bool = False, search: bool = True) -> list[Job]:
    jobs = []
    for row in fp16_first(list(published.headline_rows().itertuples())):
        settings = published.ipu_run_settings(row.model, row.precision)
        batches = settings["batch_sizes"] or [1]
        published_settings = hw.get(kind).published_settings  # the IPU runs its published settings
        clients = settings["clients"] if published_settings else 1
        params = {
            "model": row.model,
            "published_precision": row.precision,
            "batch_sizes": batches,
            "clients": clients,
            **plan_params(row_plan(row.model, row.precision, kind), kind),
            **TIMING[profile],
        }
        if published_settings:
            params["min_count"] = max(params["min_count"], IPU_MIN_COUNT)
        if search and not published_settings:
            # each job searches its own row once; later runs reuse it
            params.update(
                search=True,
                search_depth=profile,
                **({"search_force": True} if research else {}),
                **search_params(row.model, row.precision, batches, profile, kind),
            )
        jobs.append(
            Job(
                f"{row.model}_{row.precision}",
                ResultKind.MODEL_BENCHMARK.notebook,
                params,
                timeout_s=model_job_limit_s(profile, params, published_settings),
            )
        )
    return jobs


def study_job(kind: ResultKind, parameters: dict, timeout_s: int, **more) -> Job:
    """The batch's one job of a notebook that writes `kind`, named after it."""
    return Job(kind.value, kind.notebook, parameters, timeout_s, **more)


def jobs_for(
    profile: str, hardware: str = "auto", *, research: bool = False, search: bool = True
) -> list[Job]:
    """Every job of `profile`, all on the one kind `hardware` resolves to; `research` makes each
    model job search its row again instead of reusing a cached decision; `search=False` runs each
    row at the published-precision mapping alone (what the search costs, or the plain mapping)."""
    if profile not in PROFILES:
        raise InvalidParameter("profile", profile, f"one of {', '.join(PROFILES)}")
    kind = hw.resolve(hardware)
    quick = profile == "quick"
    # The C2 paper ran mixed fp16: the same mapping as the FP16 rows.
    c2 = {
        "min_duration_s": 2.0 if quick else 60.0,
        "min_count": 3 if quick else 50,
        "target_ci": TIMING[profile]["target_ci"],
        "max_duration_s": 6.0 if quick else 180.0,
        **plan_params(row_plan(C2_MODEL, PublishedPrecision.FP16, kind), kind),
    }
    server = {
        "model": SERVER_MODEL,
        **plan_params(row_plan(SERVER_MODEL, PublishedPrecision.FP16, kind), kind),
        **SERVER[profile],
    }
    return (
        [study_job(ResultKind.PUBLISHED_RESULTS, {}, 300)]
        + model_jobs(profile, kind, research, search)
        + [
            study_job(ResultKind.C2_STUDY, c2, 1200 if quick else 3600),
            study_job(ResultKind.SERVER_SCENARIO, server, 600 if quick else 3600),
            study_job(ResultKind.SUMMARY, {}, 300, after_all=True),
        ]
    )
