"""The studies, each a validated `Config` and `run(config) -> RunResult`, by name.

Floor 7 of kit/ (docs/architecture.md): imports kit.search and every floor below it; the
roofline, the operator breakdown and the serving pieces live here with the studies that use them.

>>> sorted(STUDIES)
['c2_study', 'model_benchmark', 'server_scenario']
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any

from kit.registry import Registry
from kit.studies import c2, model_benchmark, server


@dataclass(frozen=True)
class Study:
    """A study module: its `Config` class and its `run` function."""

    name: str
    module: ModuleType

    @property
    def config(self) -> type[Any]:
        return self.module.Config

    def run(self, config):
        return self.module.run(config)


STUDIES: Registry[Study] = Registry("study")
for _name, _module in (
    ("model_benchmark", model_benchmark),
    ("c2_study", c2),
    ("server_scenario", server),
):
    STUDIES.register(_name, Study(_name, _module))

__all__ = ["STUDIES", "Study", "c2", "model_benchmark", "server"]
