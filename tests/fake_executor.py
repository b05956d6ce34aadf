"""An executor for the batch tests that runs no notebook: each task writes its result JSON (ok, or
the error its job's `fake_error` parameter names) and an HTML report, at once."""

from __future__ import annotations

from collections.abc import Iterator

from kit.batch.executor import Task
from kit.batch.outcome import Outcome
from kit.batch.prepare import Prepared
from kit.results import RunResult


class FakeExecutor:
    """Writes `<job>.json` and `<job>.html` in the task's run folder; `ran` names each job run."""

    def __init__(self) -> None:
        self.ran: list[str] = []

    def prepare(self, tasks: list[Task]) -> list[Prepared]:
        return []

    def run(self, tasks: list[Task]) -> Iterator[tuple[Task, Outcome]]:
        for task in tasks:
            self.ran.append(task.job.name)
            params = {k: v for k, v in task.job.parameters.items() if k != "results_path"}
            result = RunResult.new(
                "model_benchmark", task.job.name, params, {"job": task.provenance()}
            )
            if params.get("fake_error"):
                result.fail(str(params["fake_error"]))
            result.write(task.path(".json"))
            task.path(".html").write_text(f"<html>{task.job.name}</html>", encoding="utf-8")
            yield task, Outcome("ok", "", 0.1)

    def in_flight(self) -> list[Task]:
        return []

    def stop(self) -> None:
        pass

    def close(self) -> None:
        pass
