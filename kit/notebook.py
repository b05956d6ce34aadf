"""What a notebook cell calls: one function per step, so cells stay one line each."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from kit.paths import outputs_dir
from kit.results import ResultKind, RunResult

# Reports are read, not scrolled: show reasons and provenance strings whole.
pd.set_option("display.max_colwidth", 300)


def results_path(given: str, notebook: str) -> Path:
    """Where this run writes its JSON: the path papermill passed, or outputs/interactive/."""
    return Path(given) if given else outputs_dir() / "interactive" / f"{notebook}.json"


def save(result: RunResult, given: str, notebook: str) -> Path:
    return result.write(results_path(given, notebook))


def show(result: RunResult) -> None:
    """Display the status line, errors (one line each) and provenance."""
    from IPython.display import HTML, display

    from kit.report import error_banner, provenance

    display(HTML(error_banner(result) + provenance(result)))


def run_study(name: str, params: Mapping[str, Any]) -> RunResult:
    """Run study `name` with the parameters found in `params` (a notebook passes `globals()`),
    save its result JSON (to `results_path`, or outputs/interactive/) and show its provenance.

    Side files (LoadGen logs) go beside the result JSON unless `output_dir` says otherwise.
    """
    from kit.studies import STUDIES

    study = STUDIES.get(name)
    path = results_path(str(params.get("results_path") or ""), name)
    fields = {f for f in study.config.__dataclass_fields__}
    values = {k: v for k, v in params.items() if k in fields}
    if "output_dir" in fields and not values.get("output_dir"):
        values["output_dir"] = str(path.with_suffix("")) + "_files"
    result = study.run(values)
    result.write(path)
    show(result)
    return result


def record(kind: ResultKind | str, given_path: str, parameters: dict | None = None,
           **tables: Any) -> RunResult:
    """A result for a notebook that measures nothing (published tables, the scorecard), saved to
    `given_path` (or outputs/interactive/)."""
    name = str(ResultKind(kind))
    result = RunResult.new(kind, name, parameters or {})
    result.tables.update(tables)
    result.write(results_path(given_path, name))
    return result
