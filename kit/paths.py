"""Project paths, all relative to the repository root (override with KIT_ROOT)."""

from __future__ import annotations

import os
from pathlib import Path


def project_root() -> Path:
    env = os.environ.get("KIT_ROOT")
    if env:
        return Path(env)
    here = Path(__file__).resolve().parent.parent
    return here if (here / "pyproject.toml").exists() else Path.cwd()


def outputs_dir() -> Path:
    return Path(os.environ.get("KIT_OUTPUTS", project_root() / "outputs"))


def cache_dir() -> Path:
    return Path(os.environ.get("KIT_CACHE", outputs_dir() / "cache"))


def data_dir() -> Path:
    return project_root() / "data"


def published_dir() -> Path:
    return data_dir() / "published"


def weights_dir(model: str) -> Path:
    return data_dir() / "weights" / model


def datasets_dir() -> Path:
    return data_dir() / "datasets"


def imported_reports_dir(outputs: Path | None = None) -> Path:
    """Where `kit import-bytemlperf` keeps other vendors' ByteMLPerf reports (the scorecard reads them)."""
    return (outputs or outputs_dir()) / "imported" / "bytemlperf"


def notebooks_dir() -> Path:
    return Path(os.environ.get("KIT_NOTEBOOKS", project_root() / "notebooks"))
