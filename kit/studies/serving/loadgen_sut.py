"""MLPerf LoadGen over any kit Session: a query sample library, a system under test, the runs.

LoadGen issues queries (Poisson arrivals in Server, one big query in Offline, one at a time in
SingleStream, 8 samples together in MultiStream); the SUT hands every sample to a
DynamicBatcher, which runs batches on the backend and completes each sample with
`lg.QuerySamplesComplete`. LoadGen has no warm-up, so `LoadGenRunner.warm_up` runs the batch
sizes the policy can produce before the timed test.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from kit.backends.base import Session
from kit.errors import InvalidParameter
from kit.models.spec import InputSpec, make_inputs
from kit.studies.serving.batcher import BatchPolicy, DynamicBatcher
from kit.studies.serving.summary import LoadGenSummary, read_summary

SCENARIOS = ("SingleStream", "MultiStream", "Offline", "Server")
MODES = {"performance": "PerformanceOnly", "accuracy": "AccuracyOnly"}

Sample = dict[str, np.ndarray]


def _lg():
    import mlperf_loadgen

    return mlperf_loadgen


@dataclass(frozen=True, kw_only=True)
class LoadGenConfig:
    """One LoadGen test: scenario, mode, load and the run's minimum length.

    `target_qps` is the Server's Poisson arrival rate or the Offline expected rate;
    `expected_latency_ms` seeds SingleStream/MultiStream's query count estimate.
    """

    scenario: str = "Server"
    mode: str = "performance"
    target_qps: float = 10.0
    latency_bound_ms: float = 100.0
    latency_percentile: float = 0.99
    min_duration_s: float = 2.0
    min_query_count: int = 64
    max_duration_s: float = 0.0  # 0: no cap
    sample_count: int = 64
    samples_per_query: int = 8  # MultiStream
    expected_latency_ms: float = 50.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.scenario not in SCENARIOS:
            raise InvalidParameter("scenario", self.scenario, f"one of {', '.join(SCENARIOS)}")
        if self.mode not in MODES:
            raise InvalidParameter("mode", self.mode, f"one of {', '.join(MODES)}")
        if not self.target_qps > 0:
            raise InvalidParameter("target_qps", self.target_qps, "a rate > 0 queries/s")
        if not self.latency_bound_ms > 0:
            raise InvalidParameter("latency_bound_ms", self.latency_bound_ms, "> 0 ms")
        if self.min_query_count < 1 or self.sample_count < 1 or self.samples_per_query < 1:
            raise InvalidParameter(
                "min_query_count/sample_count/samples_per_query",
                (self.min_query_count, self.sample_count, self.samples_per_query),
                ">= 1 each",
            )

    def to_dict(self) -> dict:
        return asdict(self)

    def test_settings(self):
        lg = _lg()
        s = lg.TestSettings()
        s.scenario = getattr(lg.TestScenario, self.scenario)
        s.mode = getattr(lg.TestMode, MODES[self.mode])
        s.min_duration_ms = int(self.min_duration_s * 1000)
        s.max_duration_ms = int(self.max_duration_s * 1000)
        s.min_query_count = self.min_query_count
        s.performance_sample_count_override = self.sample_count
        s.server_target_qps = self.target_qps
        s.server_target_latency_ns = int(self.latency_bound_ms * 1e6)
        s.server_target_latency_percentile = self.latency_percentile
        s.offline_expected_qps = self.target_qps
        s.single_stream_expected_latency_ns = int(self.expected_latency_ms * 1e6)
        s.multi_stream_expected_latency_ns = int(self.expected_latency_ms * 1e6)
        s.multi_stream_samples_per_query = self.samples_per_query
        s.qsl_rng_seed = s.sample_index_rng_seed = s.schedule_rng_seed = self.seed
        return s


class SampleLibrary:
    """LoadGen's query sample library: sample i is the model's generated input with seed+i.

    `loader(index) -> {input name: array at batch 1}` replaces the generator for a dataset.
    """

    def __init__(
        self,
        inputs: Sequence[InputSpec],
        count: int,
        seed: int = 0,
        loader: Callable[[int], Sample] | None = None,
    ):
        self.inputs = tuple(inputs)
        self.count = count
        self.loader = loader or (lambda i: make_inputs(self.inputs, 1, seed + i))
        self._loaded: dict[int, Sample] = {}

    def load(self, indices: Sequence[int]) -> None:
        for i in indices:
            if i not in self._loaded:
                self._loaded[i] = self.loader(i)

    def unload(self, indices: Sequence[int]) -> None:
        for i in indices:
            self._loaded.pop(i, None)

    def __getitem__(self, index: int) -> Sample:
        if index not in self._loaded:  # LoadGen loads first; this serves direct callers
            self.load([index])
        return self._loaded[index]


class BatchExecutor:
    """Runs samples as one batch: concatenated along the batch axis, outputs split per sample.

    A dynamic-batch session runs any size; static sessions (one per loaded batch size) get the
    batch padded up to the smallest loaded size that holds it.
    """

    def __init__(
        self, sessions: dict[int, Session], inputs: Sequence[InputSpec], dynamic: bool = True
    ):
        if not sessions:
            raise InvalidParameter("sessions", sessions, "at least one {batch size: Session}")
        self.sessions = dict(sorted(sessions.items()))
        self.inputs = tuple(inputs)
        self.dynamic = dynamic
        self.max_batch = max(self.sessions)

    def padded_size(self, n: int) -> int:
        if n > self.max_batch:
            raise InvalidParameter(
                "batch", n, f"at most {self.max_batch} (the largest loaded session)"
            )
        return n if self.dynamic else next(b for b in self.sessions if b >= n)

    def __call__(self, samples: list[Sample]) -> list[list[np.ndarray]]:
        n = len(samples)
        size = self.padded_size(n)
        session = self.sessions[self.max_batch] if self.dynamic else self.sessions[size]
        padded = samples + [samples[-1]] * (size - n)
        batch = {
            spec.name: np.concatenate([s[spec.name] for s in padded])
            if spec.batched
            else padded[0][spec.name]
            for spec in self.inputs
        }
        outputs = session.run(batch)
        return [[_split(o, size, i) for o in outputs] for i in range(n)]

    def warm_up(self, sample: Sample, repeats: int = 2) -> None:
        for size in range(1, self.max_batch + 1):
            for _ in range(repeats):
                self([sample] * size)


def _split(output: np.ndarray, batch: int, i: int) -> np.ndarray:
    if output.ndim and output.shape[0] % batch == 0:
        rows = output.shape[0] // batch
        return output[i * rows : (i + 1) * rows]
    return output  # an output without a batch axis belongs to every sample


class LoadGenRunner:
    """Runs LoadGen tests against `execute` (a BatchExecutor) behind a DynamicBatcher.

    `workers` is the number of servers sharing the queue (the C2 card's two IPUs would be two
    sessions; here they share one execute). In accuracy mode the outputs of every sample are
    kept in `outputs` (sample index -> list of arrays) for the accuracy evaluation.
    """

    def __init__(
        self,
        execute: Callable[[list[Sample]], list[list[np.ndarray]]],
        library: SampleLibrary,
        *,
        workers: int = 1,
    ):
        self.execute = execute
        self.library = library
        self.workers = workers
        self.outputs: dict[int, list[np.ndarray]] = {}

    def run(self, cfg: LoadGenConfig, policy: BatchPolicy, log_dir: Path) -> LoadGenSummary:
        lg = _lg()
        log_dir = Path(log_dir)
        log_dir.mkdir(parents=True, exist_ok=True)
        book = _Ledger()
        keep = cfg.mode == "accuracy"

        def run_batch(queries: list) -> None:
            results = self.execute([self.library[q.index] for q in queries])
            responses, buffers = [], []
            for q, outs in zip(queries, results, strict=True):
                buf = np.ascontiguousarray(outs[0]) if outs else np.zeros(0, np.uint8)
                buffers.append(buf)  # alive until LoadGen has copied it
                responses.append(lg.QuerySampleResponse(q.id, buf.ctypes.data, buf.nbytes))
                if keep:
                    self.outputs[q.index] = outs
            book.completed(q.id for q in queries)
            lg.QuerySamplesComplete(responses)

        def failed(queries: list, exc: BaseException) -> None:
            book.completed(q.id for q in queries)
            lg.QuerySamplesComplete([lg.QuerySampleResponse(q.id, 0, 0) for q in queries])

        batcher = DynamicBatcher(policy, run_batch, workers=self.workers, on_error=failed)

        def issue(queries: list) -> None:
            book.issued(q.id for q in queries)
            batcher.submit(queries)

        sut = lg.ConstructSUT(issue, lambda: None)
        qsl = lg.ConstructQSL(
            self.library.count,
            min(cfg.sample_count, self.library.count),
            self.library.load,
            self.library.unload,
        )
        try:
            lg.StartTestWithLogSettings(sut, qsl, cfg.test_settings(), _log_settings(log_dir))
        finally:
            batcher.close()
            lg.DestroyQSL(qsl)
            lg.DestroySUT(sut)
        summary = read_summary(log_dir)
        summary.extra.update(
            book.to_dict(),
            batcher=batcher.stats.to_dict(),
            policy=policy.to_dict(),
            config=cfg.to_dict(),
        )
        if batcher.stats.errors:
            summary.reasons.insert(
                0,
                f"backend failed in {len(batcher.stats.errors)} batches: {batcher.stats.errors[0]}",
            )
        return summary


class _Ledger:
    """Counts issued and completed query ids: a lost or twice-completed query shows up here."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.issued_ids: set[int] = set()
        self.completed_ids: set[int] = set()
        self.duplicates = 0

    def issued(self, ids) -> None:
        with self._lock:
            self.issued_ids.update(ids)

    def completed(self, ids) -> None:
        with self._lock:
            for i in ids:
                if i in self.completed_ids:
                    self.duplicates += 1
                self.completed_ids.add(i)

    def to_dict(self) -> dict:
        with self._lock:
            return {
                "issued": len(self.issued_ids),
                "completed": len(self.completed_ids),
                "lost_queries": len(self.issued_ids - self.completed_ids),
                "duplicate_completions": self.duplicates,
            }


def _log_settings(log_dir: Path):
    lg = _lg()
    settings = lg.LogSettings()
    settings.log_output.outdir = str(log_dir)
    settings.log_output.copy_summary_to_stdout = False
    settings.enable_trace = False
    return settings
