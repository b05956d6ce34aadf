"""What the runner hands an executor (Task) and what every executor offers (Executor)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from kit.batch.jobs import Job
from kit.batch.outcome import Outcome
from kit.batch.prepare import Prepared
from kit.hardware.source import file_sha256
from kit.paths import inside, notebooks_dir, project_notebook, project_root

KERNEL = "ipu-repro"


@dataclass(kw_only=True)
class Task:
    """One job to execute in this batch: its outputs go to run_dir/<job.name>.{ipynb,html,json}."""

    job: Job
    run_dir: Path
    out: Path
    fingerprint: str
    started: float | None = None  # time.perf_counter() when execution began
    command: str = ""  # the command line that started the batch (`kit reproduce ...`)

    def path(self, suffix: str) -> Path:
        return inside(self.run_dir, f"{self.job.name}{suffix}")

    def notebook_path(self) -> Path:
        """The job's notebook: one of the project's (notebooks/), else MissingResource naming it."""
        return project_notebook(self.job.notebook)

    def provenance(self) -> dict:
        """What the result records about the job that made it: enough for `kit rerun` to run it
        again (name, notebook and its hash, parameters, time limit) and the commands to say so."""
        result = self.path(".json")
        try:
            shown = result.relative_to(project_root()).as_posix()
        except ValueError:
            shown = str(result)
        source = inside(notebooks_dir(), self.job.notebook)
        return {
            "name": self.job.name,
            "notebook": self.job.notebook,
            "notebook_sha256": file_sha256(source) if source.is_file() else None,
            "parameters": {k: v for k, v in self.job.parameters.items() if k != "results_path"},
            "timeout_s": self.job.timeout_s,
            "after_all": self.job.after_all,
            "batch_command": self.command,
            "result": result.relative_to(self.out).as_posix(),
            "rerun": f"kit rerun {shown}",
        }

    def spec(self) -> dict:
        """What kit.batch.worker needs to execute the notebook into run_dir."""
        params = {**self.job.parameters, "results_path": str(self.path(".json"))}
        return {
            "input": str(self.notebook_path()),
            "output": str(self.path(".ipynb")),
            "html": str(self.path(".html")),
            "parameters": params,
            "kernel": KERNEL,
            "cwd": str(project_root()),
            "job": self.provenance(),
        }


class Executor(Protocol):
    """Runs tasks and yields each with its Outcome as it finishes (files already in run_dir)."""

    def prepare(self, tasks: list[Task]) -> list[Prepared]:
        """Make beforehand what the tasks will load, where this executor can (this machine:
        the missing exports side by side, then the torch.compile candidates the searches will
        probe, kit.batch.prepare); nothing is timed meanwhile. One record per step."""
        ...

    def run(self, tasks: list[Task]) -> Iterator[tuple[Task, Outcome]]: ...

    def in_flight(self) -> list[Task]:
        """Tasks started and not yet yielded."""
        ...

    def stop(self) -> None:
        """Stop every task in flight, processes included."""
        ...

    def close(self) -> None: ...
