"""Small helpers so notebook cells stay one line each."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from kit.paths import outputs_dir
from kit.results import RunResult

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
