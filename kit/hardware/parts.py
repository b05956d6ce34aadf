"""The exact Graphcore parts the published figures came from, and where a figure was measured
(`MeasuredOn`): figures reproduce only on the same part."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from kit.errors import InvalidParameter
from kit.hardware.kinds import IPU, hardware_class


@dataclass(frozen=True, kw_only=True)
class Part:
    """An exact Graphcore part: figures reproduce only on the same part."""

    key: str
    name: str
    ipu_version: str  # PopRT's name for the target; "" where PopRT cannot target it
    note: str = ""
    board_words: tuple[str, ...] = ()  # what gc-info's "board type" / "board variant" say on it
    # per IPU, by precision (Graphcore's datasheets)
    peaks_gflops: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


#: Env variable naming the part where the board cannot tell (an M2000 and a Bow are both `ipu2`).
PART_ENV = "KIT_IPU_PART"

PARTS = {
    p.key: p
    for p in (
        Part(
            key="gc2",
            name="Graphcore GC2 (Mk1) IPU, C2 card",
            ipu_version="",
            note="PopRT cannot target Mk1; the C2 paper used PopART from SDK 1.0",
            board_words=("C2",),
            peaks_gflops={"fp32": 31.1e3, "fp16": 124.5e3},
        ),
        Part(
            key="c600",
            name="Graphcore C600 (Mk2, ipu21)",
            ipu_version="ipu21",
            board_words=("C600",),
            peaks_gflops={"fp32": 70e3, "fp16": 280e3, "fp8": 560e3},
        ),
        Part(
            key="m2000",
            name="Graphcore GC200 (Mk2, ipu2) in an IPU-M2000",
            ipu_version="ipu2",
            board_words=("M2000",),
            peaks_gflops={"fp32": 62.5e3, "fp16": 250e3},
        ),
        Part(
            key="bow",
            name="Graphcore Bow IPU (Mk2, ipu2) in a Bow-2000",
            ipu_version="ipu2",
            note="a GC200 die stacked with a power-delivery wafer (wafer-on-wafer), clocked 1.85 "
            "GHz instead of 1.33",
            board_words=("Bow",),
            peaks_gflops={"fp32": 87.5e3, "fp16": 350e3},
        ),
    )
}


def part_for_ipu_version(
    ipu_version: str | None, board: str | None = None, env: dict[str, str] | None = None
) -> Part | None:
    """The part PopRT reports as `ipu_version` ('ipu21' -> C600); for `ipu2`, shared by the M2000
    and the Bow, the one whose name the board's type or variant (gc-info) carries ('Bow' wins over
    'M2000'), else the part named by KIT_IPU_PART; None when unknown or undecided."""
    candidates = [p for p in PARTS.values() if p.ipu_version and p.ipu_version == ipu_version]
    if len(candidates) <= 1:
        return candidates[0] if candidates else None
    text = (board or "").lower()
    for part in reversed(candidates):  # the most specific first: a Bow board may also say M2000
        if any(w.lower() in text for w in part.board_words):
            return part
    named = (os.environ if env is None else env).get(PART_ENV, "")
    if named:
        if named not in {p.key for p in candidates}:
            raise InvalidParameter(
                PART_ENV,
                named,
                f"one of {', '.join(p.key for p in candidates)} "
                f"(the parts PopRT calls {ipu_version})",
            )
        return PARTS[named]
    return None


@dataclass(frozen=True)
class MeasuredOn:
    """Where a figure was measured: its class, the device's name, the exact part (IPUs) and
    whether the IPU path was only emulated (PopRT test double: not run on an IPU)."""

    hardware_class: str  # 'cpu', 'gpu', 'ipu' or 'unknown'
    name: str
    part: str | None = None  # a PARTS key, for IPUs
    emulated: bool = False

    def same_part(self, published_part: str | None) -> bool:
        """True only for a real (not emulated) run on exactly the published part."""
        if self.emulated or published_part is None:
            return False
        if published_part in PARTS:
            return self.hardware_class == IPU.hardware_class and self.part == published_part
        return self.hardware_class == hardware_class(published_part)

    @property
    def label(self) -> str:
        tail = " [not run on an IPU: PopRT test double]" if self.emulated else ""
        return f"{self.name} ({self.hardware_class}){tail}"

    @classmethod
    def from_backend(
        cls, backend: Mapping[str, Any] | None, fallback_name: str = "?"
    ) -> MeasuredOn:
        """From a result's `backend` block (its device_info and session description)."""
        backend = backend or {}
        info = backend.get("device_info") or {}
        session = backend.get("session") or {}
        emulated = bool(info.get("emulated") or session.get("emulated"))
        part = info.get("part") or getattr(
            part_for_ipu_version(info.get("ipu_version")), "key", None
        )
        return cls(info.get("kind", "unknown"), info.get("name") or fallback_name, part, emulated)
