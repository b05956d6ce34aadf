"""The runoff's records (kit.search.runoff): each side-by-side duel, each close duel left unsettled,
and the verdict. A decision's JSON holds them as it always did (`to_dict`), and a decision file an
older kit wrote reads back (`from_dict`).

>>> d = Duel(leader="ort fp32", challenger="ov fp32", ratios=(1.1, 1.3, 1.2), median=1.2)
>>> round(d.ratio_of("ort fp32"), 3), d.other("ov fp32"), d.rounds
(0.833, 'ort fp32', 3)
>>> Duel.from_dict(d.to_dict()) == d
True
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, kw_only=True)
class Duel:
    """Two candidates timed side by side in alternating rounds: `ratios` (challenger ÷ leader per
    round) and their `median`, or the `error` either side failed with; `batch`: where a settle
    timed it (None: the search's own batch)."""

    leader: str
    challenger: str
    ratios: tuple[float, ...] = ()
    median: float | None = None
    seconds: float | None = None
    batch: int | None = None
    error: str | None = None

    @property
    def failed(self) -> bool:
        return self.error is not None

    @property
    def rounds(self) -> int:
        return len(self.ratios)

    @property
    def challenger_won(self) -> bool:
        return not self.failed and self.median is not None and self.median > 1.0

    def involves(self, label: str) -> bool:
        return label in (self.leader, self.challenger)

    def other(self, label: str) -> str:
        """The side that is not `label`."""
        return self.challenger if label == self.leader else self.leader

    def ratio_of(self, label: str) -> float:
        """`label`'s throughput ÷ the other side's, the rounds' median."""
        assert self.median is not None, f"no ratio in a failed duel: {self.error}"
        return self.median if label == self.challenger else 1 / self.median

    def ratios_of(self, label: str) -> list[float]:
        """`label`'s per-round ratios to the other side."""
        return list(self.ratios) if label == self.challenger else [1 / r for r in self.ratios]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"leader": self.leader, "challenger": self.challenger}
        if self.failed:
            out |= {"batch": self.batch} if self.batch is not None else {}
            return out | {"error": self.error}
        out |= {"ratios": list(self.ratios), "median": self.median, "seconds": self.seconds}
        return out | ({"batch": self.batch} if self.batch is not None else {})

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Duel:
        return cls(
            leader=d["leader"],
            challenger=d["challenger"],
            ratios=tuple(d.get("ratios") or ()),
            median=d.get("median"),
            seconds=d.get("seconds"),
            batch=d.get("batch"),
            error=d.get("error"),
        )


@dataclass(frozen=True)
class Unsettled:
    """A close duel not settled at the published batch, and why (`pair`: leader, challenger)."""

    pair: tuple[str, str]
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {"pair": list(self.pair), "text": self.text}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Unsettled:
        leader, challenger = d["pair"]
        return cls((leader, challenger), d["text"])


@dataclass(frozen=True, kw_only=True)
class Runoff:
    """The runoff's verdict: the `winner`'s label, every duel in the order fought (a settle right
    after the duel it settles), the window that picked the challengers, and the close duels left
    unsettled."""

    winner: str
    duels: tuple[Duel, ...] = ()
    within: float | None = None
    unsettled: tuple[Unsettled, ...] = ()

    def duels_of(self, label: str) -> list[Duel]:
        return [d for d in self.duels if d.involves(label)]

    def to_dict(self) -> dict[str, Any]:
        out = {
            "winner": self.winner,
            "duels": [d.to_dict() for d in self.duels],
            "within": self.within,
        }
        return out | ({"settle": [u.to_dict() for u in self.unsettled]} if self.unsettled else {})

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Runoff:
        return cls(
            winner=d["winner"],
            duels=tuple(Duel.from_dict(x) for x in d.get("duels") or ()),
            within=d.get("within"),
            unsettled=tuple(Unsettled.from_dict(x) for x in d.get("settle") or ()),
        )

    @classmethod
    def read(cls, value: Runoff | Mapping[str, Any] | None) -> Runoff | None:
        """`value` as a verdict: already one, the dict a decision file holds, or None (no
        runoff)."""
        if value is None or isinstance(value, Runoff):
            return value
        return cls.from_dict(value)
