"""`kit rerun RESULT.json` (`make rerun RESULT=...`): run the job that made a result again.

The job's notebook, parameters and time limit come from the result (`environment.job`, recorded by
the batch). First the kit's commit, every installed distribution, the hardware part, the published
data and the notebook are compared with the result's; each difference is listed and, unless
`--allow-drift`, the re-run stops there. The job then runs as one batch job into a new
outputs/runs/<run_id>/ and `kit compare` of the old and the new result is printed. The re-run keeps
to its folder: state.json's records of the jobs and the index's batch stay the batch's
(kit.batch.state.RERUN_OF).

Exit status: 0 re-ran ok, 1 the new run is not ok, 2 the result cannot be re-run (its recorded
parameters are checked as its study checks them, before anything runs) or the environment drifted
(the list says how).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from kit.batch.jobs import Job
from kit.batch.runner import run_jobs
from kit.batch.status import JobStatus
from kit.errors import KitError, MissingResource
from kit.hardware.drift import current, differences
from kit.paths import inside, outputs_dir, plain_name, project_notebook, project_root
from kit.publish.compare_runs import compare_runs
from kit.results import RunResult
from kit.studies import STUDIES

# Recorded parameters that name a folder the job writes in: a re-run writes only under outputs/.
WRITTEN_IN = ("output_dir",)


class EnvironmentDrift(KitError):
    """The environment differs from the one a result recorded: every difference, one a line."""

    def __init__(self, path: Path, found: list[str]):
        lines = "\n".join(f"  - {d}" for d in found)
        super().__init__(
            f"{path}: this environment differs from the result's in {len(found)} "
            f"{'way' if len(found) == 1 else 'ways'}; not re-run (restore it, or "
            f"`kit rerun --allow-drift` to re-run anyway and compare):\n{lines}"
        )
        self.differences = found


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "rerun",
        help="re-run the job that made a result, with its recorded parameters, and compare the two",
    )
    p.add_argument(
        "result",
        type=Path,
        help="a result JSON written by `kit reproduce` (outputs/runs/<run_id>/<job>.json)",
    )
    p.add_argument(
        "--allow-drift",
        action="store_true",
        help="re-run even where the commit, packages or hardware differ (they are listed)",
    )
    p.set_defaults(func=rerun)


def recorded_job(path: Path) -> tuple[RunResult, Job, dict]:
    """The result at `path`, the job that made it and the job as recorded."""
    if not path.is_file():
        raise MissingResource(
            f"{path}: no such result file; give a result JSON under "
            f"{outputs_dir() / 'runs'}/<run_id>/"
        )
    try:
        result = RunResult.read(path)
    except KitError as exc:  # names the file and why
        raise KitError(f"{exc}; give one written by `kit reproduce`") from None
    except (OSError, ValueError, TypeError) as exc:
        raise KitError(
            f"{path}: not a result JSON ({type(exc).__name__}: {exc}); give one written by "
            "`kit reproduce`"
        ) from None
    job = dict(result.environment.job)
    if not job.get("notebook") or "parameters" not in job:
        raise KitError(
            f"{path}: records no batch job ({job.get('how') or 'made before results recorded it'}"
            "); only a result written by `kit reproduce` can be re-run"
        )
    try:  # both become paths: what the job writes, and the notebook it runs
        plain_name(job.get("name"), "job name")
        project_notebook(job["notebook"])
        for key in WRITTEN_IN:
            if job["parameters"].get(key):
                # relative: to the job's working folder, the project root
                inside(outputs_dir(), project_root() / str(job["parameters"][key]))
        # an after_all job (the scorecard) runs as a plain one: its recorded result_files are kept
        again = Job(
            job["name"], job["notebook"], dict(job["parameters"]), int(job.get("timeout_s", 600))
        )
    except (KitError, TypeError, ValueError) as exc:
        raise KitError(f"{path}: its recorded job cannot be re-run: {exc}") from None
    try:  # what the notebook would refuse once started, refused before any run folder is made
        check_parameters(again)
    except (KitError, TypeError, ValueError) as exc:
        raise KitError(
            f"{path}: its recorded parameters are not valid for the {study_of(again)} study: {exc}"
        ) from None
    return result, again, job


def study_of(job: Job) -> str | None:
    """The study the job's notebook runs (`model_benchmark.ipynb`: `model_benchmark`), or None for a
    notebook that runs none (the published tables, the scorecard)."""
    study = Path(job.notebook).stem
    return study if study in STUDIES else None


def check_parameters(job: Job) -> None:
    """The job's parameters checked as its notebook's study builds its config from them (the typed
    `Config`, kit.studies.base): InvalidParameter naming the value and what is allowed, before the
    notebook starts. A notebook that runs no study has none to check."""
    if study := study_of(job):
        STUDIES.get(study).config.from_params(job.parameters)


def drift(result: RunResult, job: Job, recorded: dict) -> list[str]:
    """Every difference between the environment `result` recorded and this one, the notebook too."""
    return differences(
        {**result.environment.to_dict(), "notebook_sha256": recorded.get("notebook_sha256")},
        current(project_notebook(job.notebook)),
    )


def rerun(args: argparse.Namespace) -> int:
    path: Path = args.result
    result, job, recorded = recorded_job(path)
    found = drift(result, job, recorded)
    if found and not args.allow_drift:
        raise EnvironmentDrift(path, found)
    for line in found:
        print(f"drift (allowed): {line}")
    print(f"re-running {job.name} ({job.notebook}) with its recorded parameters")
    [record] = run_jobs(
        [job], force=True, context="rerun", command=f"kit rerun {path}", rerun_of=str(path)
    )
    new = outputs_dir() / record.results
    print(f"{record.status}: {new}" + (f" ({record.message})" if record.message else ""))
    if not new.is_file():
        return 1
    try:
        text, page = compare_runs(path, new)
    except KitError as exc:  # e.g. a job that times nothing (the scorecard): nothing to compare
        print(f"kit compare: nothing compared ({exc})")
    else:
        print(text)
        print(f"\nHTML: {page}")
    return 0 if record.status == JobStatus.OK else 1
