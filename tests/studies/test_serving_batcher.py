import random
import threading
import time

import pytest

from kit.errors import InvalidParameter
from kit.studies.serving.batcher import BatchPolicy, DynamicBatcher


def test_policy_validates_and_parses():
    with pytest.raises(InvalidParameter, match="max_batch"):
        BatchPolicy(0, 1.0)
    with pytest.raises(InvalidParameter, match="timeout_ms"):
        BatchPolicy(4, -1.0)
    assert BatchPolicy.parse((4, 10)) == BatchPolicy(4, 10.0)
    assert BatchPolicy.parse({"max_batch": 2}) == BatchPolicy(2, 0.0)
    assert BatchPolicy(8, 20).label == "B=8, T=20 ms"


def test_no_item_lost_or_run_twice_under_concurrency():
    seen, lock = [], threading.Lock()

    def run_batch(items):
        time.sleep(0.0005)
        with lock:
            seen.extend(items)

    policy = BatchPolicy(max_batch=7, timeout_ms=1.0)
    batcher = DynamicBatcher(policy, run_batch, workers=3)

    def produce(p):
        rng = random.Random(p)
        items = [(p, i) for i in range(400)]
        while items:
            k = rng.randint(1, 5)
            batcher.submit(items[:k])
            items = items[k:]
            time.sleep(rng.random() * 0.0005)

    producers = [threading.Thread(target=produce, args=(p,)) for p in range(4)]
    for t in producers:
        t.start()
    for t in producers:
        t.join()
    batcher.close()
    assert len(seen) == 1600
    assert set(seen) == {(p, i) for p in range(4) for i in range(400)}
    assert batcher.stats.items == 1600
    assert max(batcher.stats.batch_sizes) <= 7
    assert batcher.pending() == 0


def test_single_worker_keeps_arrival_order():
    order = []
    with DynamicBatcher(BatchPolicy(5, 2.0), order.extend) as batcher:
        for i in range(200):
            batcher.submit([i])
    assert order == list(range(200))


def test_partial_batch_waits_for_the_timeout():
    ran = []
    batcher = DynamicBatcher(
        BatchPolicy(100, 80.0), lambda items: ran.append((time.perf_counter(), items))
    )
    t0 = time.perf_counter()
    batcher.submit(["a"])
    time.sleep(0.03)
    batcher.submit(["b"])  # joins the batch: the deadline counts from the oldest item
    deadline = time.perf_counter() + 2
    while not ran and time.perf_counter() < deadline:
        time.sleep(0.005)
    batcher.close()
    ((t_run, items),) = ran
    assert items == ["a", "b"]
    assert 0.07 <= t_run - t0 < 0.5


def test_full_batch_runs_without_waiting():
    ran = []
    batcher = DynamicBatcher(BatchPolicy(4, 10_000.0), lambda items: ran.append(list(items)))
    t0 = time.perf_counter()
    batcher.submit(range(4))
    while not ran and time.perf_counter() - t0 < 2:
        time.sleep(0.001)
    assert time.perf_counter() - t0 < 1.0
    assert ran == [[0, 1, 2, 3]]
    batcher.submit([9])
    batcher.close()  # close runs what is queued instead of waiting 10 s
    assert ran[-1] == [9]


def test_failed_batch_is_handed_to_on_error():
    failed = []

    def boom(items):
        raise RuntimeError("device lost")

    batcher = DynamicBatcher(
        BatchPolicy(2, 0.0), boom, on_error=lambda items, exc: failed.extend(items)
    )
    batcher.submit([1, 2, 3])
    batcher.close()
    assert sorted(failed) == [1, 2, 3]
    assert batcher.stats.errors and "device lost" in batcher.stats.errors[0]
