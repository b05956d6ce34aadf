"""Serving pieces: MLPerf LoadGen over any backend, dynamic batching, max-QPS search, the queueing
simulator. The study that uses them is kit.studies.server.

>>> from kit.studies.serving import BatchPolicy
>>> BatchPolicy(8, 20).label
'B=8, T=20 ms'
"""

from kit.studies.serving.batcher import BatchPolicy, DynamicBatcher
from kit.studies.serving.loadgen_sut import (
    BatchExecutor,
    LoadGenConfig,
    LoadGenRunner,
    SampleLibrary,
)
from kit.studies.serving.search import Probe, SearchResult, find_max_qps
from kit.studies.serving.simulate import ServiceModel, predict_max_qps, simulate, sweep
from kit.studies.serving.summary import LoadGenSummary, parse_summary, read_summary

__all__ = [
    "BatchPolicy",
    "DynamicBatcher",
    "BatchExecutor",
    "LoadGenConfig",
    "LoadGenRunner",
    "SampleLibrary",
    "Probe",
    "SearchResult",
    "find_max_qps",
    "ServiceModel",
    "predict_max_qps",
    "simulate",
    "sweep",
    "LoadGenSummary",
    "parse_summary",
    "read_summary",
]
