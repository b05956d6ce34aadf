"""The published studies, one enum: the `study` column of data/published/figures.csv (checked
against it when the file is read) and the scorecard's per-batch rows of ByteMLPerf's report JSONs.
Members are strings (StrEnum): a scorecard row's, a figure's or a notebook's study equals and
serialises as the value the files hold.

>>> PublishedStudy.parse("c2_qwant") is PublishedStudy.C2_QWANT
True
>>> PublishedStudy.BYTEMLPERF_C600_OLDER.is_bytemlperf
True
"""

from __future__ import annotations

from enum import StrEnum

from kit.errors import parse_member

__all__ = ["BYTEMLPERF_STUDIES", "PublishedStudy"]


class PublishedStudy(StrEnum):
    """A published source of figures the kit reproduces or reports."""

    BYTEMLPERF_C600 = "bytemlperf_c600"  # seed 001: ByteMLPerf's IPU README table
    BYTEMLPERF_C600_OLDER = "bytemlperf_c600_older"  # seed 000: its older table
    BYTEMLPERF_REPORTS = "bytemlperf_reports"  # the per-batch figures of ByteMLPerf's report JSONs
    C2_QWANT = "c2_qwant"  # seed 003: Qwant's C2 study, tables 1-3
    C600_SPEC = "c600_spec"
    GRAPHCORE_PERF_PAGE = "graphcore_perf_page"
    MLPERF_TRAINING_V1 = "mlperf_training_v1"
    PRICE_PERFORMANCE = "price_performance"
    SDK_SPEEDUPS = "sdk_speedups"
    SYSTEM_FACTS = "system_facts"

    @classmethod
    def parse(cls, value: str) -> PublishedStudy:
        """The member `value` names; else UnknownValueError naming the allowed ones."""
        return parse_member(cls, value, "published study")

    @property
    def is_bytemlperf(self) -> bool:
        """Whether its rows are ByteMLPerf model rows (one job per model and precision)."""
        return self in BYTEMLPERF_STUDIES


#: the studies whose rows are ByteMLPerf model rows
BYTEMLPERF_STUDIES = frozenset(
    {
        PublishedStudy.BYTEMLPERF_C600,
        PublishedStudy.BYTEMLPERF_C600_OLDER,
        PublishedStudy.BYTEMLPERF_REPORTS,
    }
)
