"""A dynamic batcher: collect up to B queries or wait at most T ms, then run one batch.

The batcher is generic over its items (LoadGen query samples in the Server scenario, plain
objects in the tests). Each worker thread stands for one server (one session, one IPU); only
one worker collects a batch at a time, so with several workers batches still form in arrival
order. The simulator (kit.studies.serving.simulate) follows the same rules.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Generic, TypeVar

from kit.errors import InvalidParameter

T = TypeVar("T")


@dataclass(frozen=True)
class BatchPolicy:
    """Run a batch when `max_batch` queries wait, or when the oldest has waited `timeout_ms`."""

    max_batch: int = 8
    timeout_ms: float = 5.0

    def __post_init__(self) -> None:
        if (
            isinstance(self.max_batch, bool)
            or not isinstance(self.max_batch, int)
            or self.max_batch < 1
        ):
            raise InvalidParameter("max_batch", self.max_batch, "a whole number >= 1")
        if not self.timeout_ms >= 0:
            raise InvalidParameter("timeout_ms", self.timeout_ms, "a number of milliseconds >= 0")

    @property
    def label(self) -> str:
        return f"B={self.max_batch}, T={self.timeout_ms:g} ms"

    def to_dict(self) -> dict:
        return {**asdict(self), "label": self.label}

    @classmethod
    def parse(cls, value: BatchPolicy | dict | tuple | list) -> BatchPolicy:
        """A policy from a dict {'max_batch', 'timeout_ms'} or a pair (B, T ms)."""
        if isinstance(value, BatchPolicy):
            return value
        if isinstance(value, dict):
            return cls(int(value["max_batch"]), float(value.get("timeout_ms", 0.0)))
        if isinstance(value, tuple | list) and len(value) == 2:
            return cls(int(value[0]), float(value[1]))
        raise InvalidParameter(
            "policy", value, "a BatchPolicy, {'max_batch': B, 'timeout_ms': T} or (B, T)"
        )


@dataclass
class BatcherStats:
    """What the batcher did: how many batches of each size, and failures."""

    batch_sizes: collections.Counter = field(default_factory=collections.Counter)
    errors: list[str] = field(default_factory=list)

    @property
    def batches(self) -> int:
        return sum(self.batch_sizes.values())

    @property
    def items(self) -> int:
        return sum(size * n for size, n in self.batch_sizes.items())

    @property
    def mean_batch(self) -> float:
        return self.items / self.batches if self.batches else float("nan")

    def to_dict(self) -> dict:
        return {
            "batches": self.batches,
            "items": self.items,
            "mean_batch": self.mean_batch,
            "batch_sizes": {str(k): v for k, v in sorted(self.batch_sizes.items())},
            "errors": self.errors[:10],
        }


class DynamicBatcher(Generic[T]):
    """Queue items from any thread; `workers` threads run `run_batch(items)` under `policy`.

    `run_batch` must complete every item it is given; if it raises, `on_error(items, exc)`
    is called so the caller can still complete them (LoadGen waits for every query).
    """

    def __init__(
        self,
        policy: BatchPolicy,
        run_batch: Callable[[list[T]], None],
        *,
        workers: int = 1,
        on_error: Callable[[list[T], BaseException], None] | None = None,
    ):
        if workers < 1:
            raise InvalidParameter("workers", workers, ">= 1")
        self.policy = policy
        self.run_batch = run_batch
        self.on_error = on_error
        self.stats = BatcherStats()
        self._queue: collections.deque[tuple[float, T]] = collections.deque()
        self._cond = threading.Condition()
        self._collect = threading.Lock()  # one worker forms a batch at a time
        self._closed = False
        self._threads = [
            threading.Thread(target=self._work, daemon=True, name=f"batcher-{i}")
            for i in range(workers)
        ]
        for t in self._threads:
            t.start()

    def submit(self, items: Iterable[T]) -> None:
        now = time.perf_counter()
        with self._cond:
            if self._closed:
                raise RuntimeError("batcher is closed")
            self._queue.extend((now, item) for item in items)
            self._cond.notify_all()

    def pending(self) -> int:
        with self._cond:
            return len(self._queue)

    def close(self, timeout: float | None = 30.0) -> None:
        """Run what is queued, then stop the workers."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        for t in self._threads:
            t.join(timeout)

    def __enter__(self) -> DynamicBatcher[T]:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _work(self) -> None:
        while True:
            batch = self._next_batch()
            if batch is None:
                return
            try:
                self.run_batch(batch)
            except BaseException as exc:  # noqa: BLE001 - reported, and the items still completed
                self.stats.errors.append(f"{type(exc).__name__}: {exc}")
                if self.on_error is not None:
                    self.on_error(batch, exc)

    def _next_batch(self) -> list[T] | None:
        size, timeout = self.policy.max_batch, self.policy.timeout_ms / 1e3
        with self._collect, self._cond:
            while not self._queue:
                if self._closed:
                    return None
                self._cond.wait()
            deadline = self._queue[0][0] + timeout
            while len(self._queue) < size and not self._closed:
                remaining = deadline - time.perf_counter()
                if remaining <= 0:
                    break
                self._cond.wait(remaining)
            n = min(size, len(self._queue))
            batch = [self._queue.popleft()[1] for _ in range(n)]
            self.stats.batch_sizes[n] += 1
            return batch
