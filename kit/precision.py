"""The kit's two precision vocabularies, each one enum: what a published row states
(`PublishedPrecision`, upper case: "FP16") and what the kit runs at (`RunPrecision`, lower case:
"fp16"). Members are strings (StrEnum): they equal, hash and serialise as the values results,
caches and the published CSVs hold. The only case changes of a precision live here: a
published precision's `parse` reads either case (a command line's "fp16" row), `as_run` maps it
to the run precision of its own type (what the IPU runs a row at; what a row runs at elsewhere is
kit.search.precision_map's), and `report_spelling` writes ByteMLPerf's report spelling.

>>> PublishedPrecision.parse("fp8").as_run
<RunPrecision.FP8: 'fp8'>
>>> RunPrecision.parse("bf16").bits
16
"""

from __future__ import annotations

from enum import StrEnum

from kit.errors import parse_member

__all__ = ["PublishedPrecision", "RunPrecision", "report_spelling"]


class RunPrecision(StrEnum):
    """A precision the kit runs a model at (a backend config's, a probe's, a result's)."""

    FP32 = "fp32"
    BF16 = "bf16"
    FP16 = "fp16"
    INT8 = "int8"
    FP8 = "fp8"

    @classmethod
    def parse(cls, value: str) -> RunPrecision:
        """The member `value` names (lower case, as every result and config writes it); else
        UnknownValueError naming the allowed ones."""
        return parse_member(cls, value, "run precision")

    @property
    def bits(self) -> int:
        return RUN_BITS[self]

    @property
    def report_name(self) -> str:
        """As ByteMLPerf's reports write it ("FP16", "INT8")."""
        return report_spelling(self)


class PublishedPrecision(StrEnum):
    """A precision a published IPU row states."""

    FP32 = "FP32"
    FP16 = "FP16"
    FP8 = "FP8"

    @classmethod
    def parse(cls, value: str) -> PublishedPrecision:
        """The member spelt `value` in either case; UnknownValueError naming the allowed ones."""
        return parse_member(cls, str(value).upper(), "published precision")

    @property
    def bits(self) -> int:
        return RUN_BITS[self.as_run]

    @property
    def as_run(self) -> RunPrecision:
        """The run precision of the same type (FP16 -> fp16): what the IPU runs this row at."""
        return AS_RUN[self]


#: bits of each run precision (a published one has its run twin's)
RUN_BITS: dict[RunPrecision, int] = {
    RunPrecision.FP32: 32,
    RunPrecision.BF16: 16,
    RunPrecision.FP16: 16,
    RunPrecision.INT8: 8,
    RunPrecision.FP8: 8,
}
#: the one mapping between the two vocabularies: each published precision's run twin
AS_RUN: dict[PublishedPrecision, RunPrecision] = {
    PublishedPrecision.FP32: RunPrecision.FP32,
    PublishedPrecision.FP16: RunPrecision.FP16,
    PublishedPrecision.FP8: RunPrecision.FP8,
}


def report_spelling(precision: str) -> str:
    """A precision as ByteMLPerf's reports spell it, upper case: a vendor's report may state one the
    kit does not run ("INT8/BF16"), so this is text, not a member.

    >>> report_spelling("fp16")
    'FP16'
    """
    return str(precision).strip().upper()
