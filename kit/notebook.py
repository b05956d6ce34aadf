"""What a notebook cell calls: one function per step, so cells stay one line each."""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from kit import progress
from kit.errors import KitError
from kit.hardware.environment import capture
from kit.hardware.source import JOB_ENV
from kit.measure.memory import WARM_ENV, resources, start_warm_peaks
from kit.paths import notebooks_dir, outputs_dir
from kit.publish import scorecard
from kit.publish.bytemlperf_export import export as export_bytemlperf
from kit.publish.report import opening, provenance
from kit.published.studies import PublishedStudy
from kit.results import ResultKind, RunResult
from kit.studies import STUDIES

# PublishedStudy: a cell names a study by it (the scorecard's tables, the seed tables)
__all__ = [
    "PublishedStudy",
    "build_scorecard",
    "forget_previous_job",
    "record",
    "report_links",
    "results_path",
    "run_study",
    "save",
    "show",
    "start_warm_job",
]

# Reports are read, not scrolled: show reasons and provenance strings whole.
pd.set_option("display.max_colwidth", 300)


def results_path(given: str, notebook: str) -> Path:
    """Where this run writes its JSON: the path papermill passed, or a new file in
    outputs/interactive/ named by the time of the run (`<notebook>-<YYYYmmdd-HHMMSS>.json`,
    `-2`, `-3`... when two runs start in the same second), so no earlier interactive result is
    overwritten. The new file is reserved (created empty) until the run writes it."""
    if given:
        return Path(given)
    folder = outputs_dir() / "interactive"
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"{notebook}-{dt.datetime.now():%Y%m%d-%H%M%S}"
    for n in range(1, 1000):
        path = folder / f"{stem}{'' if n == 1 else f'-{n}'}.json"
        try:
            path.open("x").close()
            return path
        except FileExistsError:
            continue
    raise FileExistsError(f"{folder}: no free name for {stem}.json")


@contextmanager
def _reserved(path: Path) -> Iterator[Path]:
    """Remove `path` again if the run ends (interrupted) before writing it."""
    try:
        yield path
    finally:
        if path.exists() and path.stat().st_size == 0:
            path.unlink()


def save(result: RunResult, given: str, notebook: str) -> Path:
    return result.write(results_path(given, notebook))


def show(result: RunResult) -> None:
    """Display what the run shows first (its verdict sentence, or its errors), then its
    provenance."""
    from IPython.display import HTML, display

    display(HTML(opening(result) + provenance(result)))


def run_study(name: str, params: Mapping[str, Any]) -> RunResult:
    """Run study `name` with the parameters found in `params` (a notebook passes `globals()`),
    save its result JSON (to `results_path`, or a new file in outputs/interactive/) and show its
    provenance. Progress is shown unless papermill passed `results_path` (a batch).

    Side files (LoadGen logs) go beside the result JSON unless `output_dir` says otherwise.
    """
    study = STUDIES.get(name)
    given = str(params.get("results_path") or "")
    fields = {f for f in study.config.__dataclass_fields__}
    values = {k: v for k, v in params.items() if k in fields}
    with _reserved(results_path(given, name)) as path:
        if "output_dir" in fields and not values.get("output_dir"):
            values["output_dir"] = str(path.with_suffix("")) + "_files"
        with progress.quiet(bool(given)):  # papermill passes results_path: the batch shows progress
            result = study.run(values)
        result.write(path)
        exported = _export(result, path)
    show(result)
    if exported:
        print(f"ByteMLPerf report: {exported}")
    if not given:
        print(f"Result saved to {path}")
    return result


def _export(result: RunResult, path: Path) -> Path | None:
    """The ByteMLPerf report beside a model benchmark's result; a failure to write it is noted in
    the result (written again), never lost and never a lost run."""
    try:
        return export_bytemlperf(result, path)
    except (KitError, OSError, ValueError, KeyError) as exc:
        result.notes.append(f"ByteMLPerf export not written ({type(exc).__name__}: {exc}).")
        result.write(path)
        return None


def record(
    kind: ResultKind | str, given_path: str, parameters: dict | None = None, **tables: Any
) -> RunResult:
    """A result for a notebook that measures nothing (published tables, the scorecard), saved to
    `given_path` (or outputs/interactive/)."""
    name = str(ResultKind(kind))
    result = RunResult.new(kind, name, parameters or {}, capture())
    for name, rows in tables.items():
        result.tables = result.tables.with_table(name, rows)
    result.resources = resources()
    with _reserved(results_path(given_path, name)) as path:
        result.write(path)
    return result


def report_links(result_files: list[str], given_path: str = "") -> dict[str, str]:
    """Job name (a result file's stem) -> the href of its HTML report, relative to the folder of
    the summary's own report (beside `given_path`; in JupyterLab, the notebook's folder), for the
    reports that exist. With several results of one job (every run under outputs/), the latest
    run's; and each result's own report by its `scorecard.result_key`, which a row that read that
    result links to (kit.publish.card_table.report_href)."""
    here = Path(given_path).parent if given_path else notebooks_dir()
    links = {}
    for path in scorecard.result_paths(list(result_files)):
        page = path.with_suffix(".html")
        if page.exists() and path.stem != ResultKind.SUMMARY:
            href = Path(os.path.relpath(page, here)).as_posix()
            links[path.stem] = links[scorecard.result_key(path)] = href
    return links


def build_scorecard(result_files: list[str], given_path: str = "") -> pd.DataFrame:
    """The scorecard of `result_files` (default: every result under outputs/runs/), saved as the
    summary notebook's result JSON."""
    card = scorecard.build(scorecard.result_paths(list(result_files)))
    record(
        ResultKind.SUMMARY,
        given_path,
        {"result_files": list(result_files)},
        counts=scorecard.summary_counts(card),
        scorecard=card.to_dict("records"),
    )
    return card


# What a job leaves in the kit's modules that the next job in the same warm kernel must not find
# (kit.batch.worker --serve). Kept: caches keyed by a file's identity (kit.cache's digests,
# onnx_conversion's op counts), facts of this machine and install (the functools.cache'd hardware
# probes, the published tables, kit_source) and weak references (the IPU backend's live sessions).
_FORGET: tuple[tuple[str, Callable[[Any], object]], ...] = (
    # one built model per process: a whole model's weights held into the next job
    ("kit.backends.torch_backend", lambda m: m.built_module.cache_clear()),
    # reference outputs (arrays) held in memory: a later row reads its own from the disk entries,
    # keyed by the export's content, the batch and the inputs (kit.backends.reference_outputs)
    ("kit.backends.reference_outputs", lambda m: m.forget()),
    # whether PopRT imports: the container may have gone since, and a job probes it afresh
    ("kit.backends.ipu.backend", lambda m: m._AVAILABILITY.clear()),
    # what the kit did to GCDA_MONITOR: the environment it describes is restored for each job
    ("kit.measure.power.ipu", lambda m: m._monitoring_record.clear()),
)
_KERNEL_START: dict[str, dict[str, Any]] = {}  # the warm kernel's settings before its 1st job


def forget_previous_job() -> None:
    """Clear what an earlier job left in the kit's modules (_FORGET), in the modules imported."""
    for name, clear in _FORGET:
        module = sys.modules.get(name)
        if module is not None:
            clear(module)


def start_warm_job(cwd: str, job: dict | None) -> dict[str, bool]:
    """In the batch's warm kernel, before each job, after `%reset -f`: the kernel's first
    environment and `cwd` back, the job in KIT_JOB (as a fresh kernel inherits it), the kit's
    per-job caches cleared, freed memory released and the peak reset. Returns {"peak_reset": the
    VmHWM now counts from here, "cuda_ok": CUDA (if initialised) still runs: a sticky CUDA error
    of the last job would fail every later one}."""
    _restore_process_settings()
    os.chdir(cwd)
    if job:
        os.environ[JOB_ENV] = json.dumps(job)
    forget_previous_job()
    _forget_compiled_graphs()
    cuda_ok = _release_cuda_memory()
    peak_reset = start_warm_peaks()
    os.environ[WARM_ENV] = "reset" if peak_reset else "since-start"
    return {"peak_reset": peak_reset, "cuda_ok": cuda_ok}


def _restore_process_settings() -> None:
    """The process-wide settings a notebook may change, back to what they were before the warm
    kernel's first job: the environment, the warning filters (and what they already showed), the
    root logger's level and numpy's floating-point error handling. Not restored: modules stay
    imported, and with them what they added to sys.path (setuptools' vendored folder); pandas and
    matplotlib options, numpy's global random state and torch's thread count (the kit seeds its own
    generators and sets threads per session)."""
    first = _KERNEL_START.setdefault(
        "settings",
        {
            "environ": dict(os.environ),
            "filters": list(warnings.filters),
            "log_level": logging.getLogger().level,
            "seterr": np.geterr(),
        },
    )
    os.environ.clear()
    os.environ.update(first["environ"])
    warnings.filters[:] = first["filters"]  # type: ignore[index]  # a list at run time
    getattr(warnings, "_filters_mutated", lambda: None)()  # shown once: shown again in this job
    logging.getLogger().setLevel(first["log_level"])
    np.seterr(**first["seterr"])


def _forget_compiled_graphs() -> None:
    """torch.compile's graphs and recompile counts of earlier jobs dropped (where dynamo is
    imported): a later row of the same model class would otherwise hit dynamo's recompile limit
    and fall back to eager, or reuse a graph a fresh kernel would compile."""
    dynamo = sys.modules.get("torch._dynamo")
    if dynamo is not None:
        dynamo.reset()


def _release_cuda_memory() -> bool:
    """Hand torch's cached CUDA blocks back, where torch is imported and CUDA initialised; False
    where CUDA fails (a sticky error of the last job)."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        return True
    try:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    except RuntimeError:
        return False
    return True
