"""Which GPU paths of this kit version have run on a real NVIDIA GPU, from data/gpu/verified.csv
(one row per backend path; `run_on_gpu` names the card, kit commit and date once one has, and is
empty until then). Every report states it, as the IPU reports say "not run on an IPU".

>>> gpu_paths_statement().startswith("GPU paths of this kit version run on a real GPU:")
True
"""

from __future__ import annotations

import csv
import functools
from dataclasses import dataclass

from kit.paths import data_dir


@dataclass(frozen=True)
class GpuPath:
    backend: str
    path: str
    run_on_gpu: str  # '' until it has: the card, kit commit and date
    evidence: str

    @property
    def label(self) -> str:
        return f"{self.backend}: {self.path}"


@functools.cache
def gpu_paths() -> tuple[GpuPath, ...]:
    with open(data_dir() / "gpu" / "verified.csv", newline="") as f:
        return tuple(
            GpuPath(r["backend"], r["path"], r["run_on_gpu"].strip(), r["evidence"])
            for r in csv.DictReader(f)
        )


def gpu_paths_statement() -> str:
    """One sentence: the GPU paths run on a real GPU, and those checked only through test
    doubles."""
    paths = gpu_paths()
    ran = [p for p in paths if p.run_on_gpu]
    not_run = [p for p in paths if not p.run_on_gpu]
    done = "; ".join(f"{p.label} ({p.run_on_gpu})" for p in ran) or f"none of {len(paths)}"
    rest = (
        (
            f"; not run on a GPU (checked only through test doubles enforcing the real APIs): "
            f"{'; '.join(p.label for p in not_run)}"
        )
        if not_run
        else ""
    )
    return f"GPU paths of this kit version run on a real GPU: {done}{rest}."
