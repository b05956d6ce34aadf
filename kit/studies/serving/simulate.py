"""Predict Server behaviour from fixed-batch latencies: a discrete-event batching queue.

Queries arrive as a Poisson process; `servers` identical servers (sessions, IPUs) each run one
batch at a time, taking L(b) for a batch of b. Batches form exactly as in DynamicBatcher: one
idle server collects at a time and dispatches when `max_batch` queries wait or the oldest has
waited `timeout_ms`. A latency table entry may be one number (deterministic service) or the
measured per-call latencies (service drawn from them). Sizes between table entries are
interpolated linearly.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from kit.errors import InvalidParameter
from kit.studies.serving.batcher import BatchPolicy
from kit.studies.serving.search import Probe, SearchResult, find_max_qps

LatencyTable = Mapping[int, float | Sequence[float]]  # batch size -> ms (or measured ms samples)


class ServiceModel:
    """L(b) in seconds: deterministic from the medians, or resampled from measured calls."""

    def __init__(self, table: LatencyTable, *, resample: bool = True):
        if not table:
            raise InvalidParameter("latency table", table, "at least one {batch size: ms}")
        self.sizes = np.array(sorted(int(b) for b in table), dtype=float)
        samples = {
            int(b): np.atleast_1d(np.asarray(v, dtype=float)) / 1e3 for b, v in table.items()
        }
        if any(s.size == 0 or not np.all(s > 0) for s in samples.values()):
            raise InvalidParameter("latency table", dict(table), "latencies > 0 ms")
        self.samples = samples
        self.medians = np.array([np.median(samples[int(b)]) for b in self.sizes])
        self.resample = resample

    @property
    def max_batch(self) -> int:
        return int(self.sizes[-1])

    def median(self, b: int) -> float:
        return float(np.interp(b, self.sizes, self.medians))

    def capacity(self, policy: BatchPolicy, servers: int = 1) -> float:
        """The most queries/s the policy can ever serve: full batches back to back."""
        b = min(policy.max_batch, self.max_batch)
        return servers * b / self.median(b)


@dataclass(kw_only=True)
class SimResult:
    """Simulated latencies (ms) at one offered rate."""

    offered_qps: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    mean_ms: float
    completed_qps: float
    mean_batch: float

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def simulate(
    table: LatencyTable | ServiceModel,
    policy: BatchPolicy,
    qps: float,
    *,
    queries: int = 20000,
    servers: int = 1,
    seed: int = 0,
    resample: bool = True,
) -> SimResult:
    """Simulate `queries` Poisson arrivals at `qps` through the batching policy."""
    if not qps > 0:
        raise InvalidParameter("qps", qps, "> 0")
    model = table if isinstance(table, ServiceModel) else ServiceModel(table, resample=resample)
    B = min(policy.max_batch, model.max_batch)
    T = policy.timeout_ms / 1e3
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1 / qps, size=queries)).tolist()
    draw = _service_draws(model, B, queries, rng)
    latencies = np.empty(queries)
    free = [0.0] * servers  # when each server is next idle (a heap)
    collector = 0.0  # when the last batch was dispatched: one server collects at a time
    head, batches, inf = 0, 0, float("inf")
    while head < queries:
        t_free = heapq.heappop(free)
        t0 = max(t_free, arrivals[head], collector)
        full_at = arrivals[head + B - 1] if head + B - 1 < queries else inf
        dispatch = t0 if full_at <= t0 else max(t0, min(arrivals[head] + T, full_at))
        n = min(B, bisect.bisect_right(arrivals, dispatch, head, min(head + B, queries)) - head)
        done = dispatch + draw(n, batches)
        latencies[head : head + n] = done - np.asarray(arrivals[head : head + n])
        head += n
        batches += 1
        collector = dispatch
        heapq.heappush(free, done)
    span = max(free) - arrivals[0]
    p50, p90, p99 = np.percentile(latencies, [50, 90, 99]) * 1e3
    return SimResult(
        offered_qps=qps,
        p50_ms=float(p50),
        p90_ms=float(p90),
        p99_ms=float(p99),
        mean_ms=float(latencies.mean() * 1e3),
        completed_qps=float(queries / span),
        mean_batch=queries / batches,
    )


def _service_draws(model: ServiceModel, max_batch: int, batches: int, rng: np.random.Generator):
    """draw(b, k): the k-th batch's service time for size b, from pre-drawn random numbers."""
    medians = [model.median(b) for b in range(max_batch + 1)]
    if not model.resample:
        return lambda b, k: medians[b]
    u = rng.random(batches).tolist()
    ratios = {}
    for b in range(1, max_batch + 1):
        nearest = int(model.sizes[np.argmin(np.abs(model.sizes - b))])
        s = model.samples[nearest]
        ratios[b] = np.sort(s / np.median(s)).tolist()

    def draw(b: int, k: int) -> float:
        r = ratios[b]
        return medians[b] * r[int(u[k] * len(r))]

    return draw


def sweep(
    table: LatencyTable | ServiceModel, policy: BatchPolicy, rates: Sequence[float], **kwargs
) -> list[SimResult]:
    return [simulate(table, policy, q, **kwargs) for q in rates]


def predict_max_qps(
    table: LatencyTable | ServiceModel,
    policy: BatchPolicy,
    bound_ms: float,
    *,
    servers: int = 1,
    queries: int = 20000,
    seed: int = 0,
    resample: bool = True,
    rel_tol: float = 0.01,
) -> SearchResult:
    """The highest offered rate whose simulated p99 stays under `bound_ms` (a prediction)."""
    model = table if isinstance(table, ServiceModel) else ServiceModel(table, resample=resample)
    capacity = model.capacity(policy, servers)

    def run(qps: float) -> Probe:
        r = simulate(model, policy, qps, queries=queries, servers=servers, seed=seed)
        return Probe(qps=qps, p99_ms=r.p99_ms, passed=r.p99_ms <= bound_ms, extra=r.to_dict())

    return find_max_qps(
        run,
        start_qps=0.5 * capacity,
        upper_qps=capacity,
        rel_tol=rel_tol,
        max_probes=40,
        min_qps=capacity * 1e-4,
    )
