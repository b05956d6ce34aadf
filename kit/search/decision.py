"""A row's search decision as one typed record: the plan it chose, its ratio to today's mapping,
every candidate's probe and how the search ran. It is what the cache stores (outputs/cache/search/,
JSON through `to_dict`/`from_dict`) and what a result's `search` and `search_decision` tables hold;
`from_dict` reads the files older kits wrote (a missing field takes its default).

>>> d = Decision.from_dict({"chosen": "ort fp32 (cpu)", "plan": {"backend": "onnxruntime", "precision": "fp32",
...                         "device": "cpu"}, "probes": [{"label": "ort fp32 (cpu)", "backend": "onnxruntime",
...                         "precision": "fp32", "device": "cpu", "options": {}, "threads": None,
...                         "native": True, "why": ""}]})
>>> d.plan.placement.backend, d.probes[0].label, Decision.from_dict(d.to_dict()) == d
('onnxruntime', 'ort fp32 (cpu)', True)
"""  # noqa: E501

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field, fields
from typing import Any

from kit.backends import Placement
from kit.backends.placement import flat_dict, unflat_dict
from kit.results.windows import Noise
from kit.search.duels import Runoff
from kit.search.probe import Probe


def _known(cls: type[Any], d: dict[str, Any]) -> dict[str, Any]:
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in d.items() if k in names}


@dataclass(frozen=True)
class Plan:
    """The model_benchmark parameters that run the chosen configuration (`placement`, flat in the
    JSON), and the note a report prints."""

    placement: Placement
    _: KW_ONLY
    precision_note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return flat_dict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Plan:
        return cls(**_known(cls, unflat_dict(d)))


@dataclass(kw_only=True)
class Decision:
    """What a row's search chose and why. `fallback`: it measured no candidate and `plan` is today's
    mapping (a job never takes it over its own plan); `ratio_batch`: the batch where a near tie was
    settled (kit.search.runoff), None where the search's own batch decided; `runoff`: the
    side-by-side duels' verdict; `key` and `cache_file`: the cache entry it is stored under."""

    chosen: str | None
    today: str | None
    plan: Plan
    fallback: bool = False
    ratio_vs_today: float | None = None
    ratio_interval: list[float | None] = field(default_factory=lambda: [None, None])
    ratio_batch: int | None = None
    separated: bool = False
    probes: list[Probe] = field(default_factory=list)
    runoff: Runoff | None = None
    model: str = ""
    published: str = ""
    batch_size: int = 0
    kind: str = ""
    depth: str = "quick"
    # SearchSettings' fields and the probe's MeasureConfig
    settings: dict[str, Any] = field(default_factory=dict)
    native_16bit: list[str] = field(default_factory=list)
    searched_s: float | None = None
    shared_probes: int = 0
    shared_from: str | None = None  # the sibling row's cache file its shared probes came from
    # kit.measure.noise.idle_sample's verdict (its noisy flag, reasons, other load and steal)
    machine_at_start: Noise = field(default_factory=lambda: Noise.from_dict({}))  # {}: no sample
    load_average: float | None = None
    cores: int | None = None
    contended: bool = False
    created_at: str = ""
    key: dict[str, Any] | None = None
    cache_file: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {**self.summary(), "probes": [p.to_dict() for p in self.probes]}

    def summary(self) -> dict[str, Any]:
        """Everything but the probe table (a result's `search_decision` table)."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "probes"}
        runoff = self.runoff.to_dict() if self.runoff else None
        machine = self.machine_at_start.to_dict()
        return {**out, "plan": self.plan.to_dict(), "runoff": runoff, "machine_at_start": machine}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Decision:
        known = _known(cls, d)
        return cls(
            **{
                "chosen": None,
                "today": None,
                **known,
                "plan": Plan.from_dict(d.get("plan") or {}),
                "runoff": Runoff.read(d.get("runoff")),
                "machine_at_start": Noise.from_dict(d.get("machine_at_start")),
                "probes": [Probe.from_dict(p) for p in d.get("probes") or []],
            }
        )
