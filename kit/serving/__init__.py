"""Serving pieces: MLPerf LoadGen over any backend, dynamic batching, max-QPS search, the queueing
simulator. The study that uses them is kit.studies.server.

>>> from kit.serving import BatchPolicy
>>> BatchPolicy(8, 20).label
'B=8, T=20 ms'
"""

from kit.serving.batcher import BatchPolicy, DynamicBatcher
from kit.serving.loadgen_sut import BatchExecutor, LoadGenConfig, LoadGenRunner, SampleLibrary
from kit.serving.search import Probe, SearchResult, find_max_qps
from kit.serving.simulate import ServiceModel, predict_max_qps, simulate, sweep
from kit.serving.summary import LoadGenSummary, parse_summary, read_summary

__all__ = ["BatchPolicy", "DynamicBatcher", "BatchExecutor", "LoadGenConfig", "LoadGenRunner",
           "SampleLibrary", "Probe", "SearchResult", "find_max_qps", "ServiceModel",
           "predict_max_qps", "simulate", "sweep",
           "LoadGenSummary", "parse_summary", "read_summary"]
