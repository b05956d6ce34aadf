import json
import time

import numpy as np
import pytest

from kit.backends.base import Session
from kit.errors import InvalidParameter
from kit.models.spec import InputSpec
from kit.studies.serving.batcher import BatchPolicy
from kit.studies.serving.loadgen_sut import (
    BatchExecutor,
    LoadGenConfig,
    LoadGenRunner,
    SampleLibrary,
)
from kit.studies.serving.summary import SUMMARY_FILE

pytest.importorskip("mlperf_loadgen")

INPUTS = (InputSpec("x", (1, 3), "float32"),)
BATCH_MS = 20.0  # long enough that sleep overshoot and harness overhead stay ~2 %


class FixedLatencySession(Session):
    """A backend double: every batch, whatever its size, takes BATCH_MS; output = 2 x input."""

    description = {"backend": "fake", "batch_ms": BATCH_MS}

    def __init__(self):
        self.batch_sizes = []
        self.took_s = []  # what each sleep really took: a busy machine oversleeps

    def run(self, inputs):
        self.batch_sizes.append(inputs["x"].shape[0])
        t0 = time.perf_counter()
        time.sleep(BATCH_MS / 1e3)
        self.took_s.append(time.perf_counter() - t0)
        return [inputs["x"] * 2]

    def bind(self, inputs):
        return lambda: self.run(inputs)


def make_runner(max_batch=1, dynamic=True, sessions=None):
    session = FixedLatencySession()
    executor = BatchExecutor(sessions or {max_batch: session}, INPUTS, dynamic=dynamic)
    return LoadGenRunner(executor, SampleLibrary(INPUTS, 16)), session


def short(**kw):
    return LoadGenConfig(**{"min_duration_s": 1.0, "min_query_count": 32, "sample_count": 16, **kw})


@pytest.mark.parametrize("max_batch", [1, 4])
def test_server_capacity_matches_the_fixed_latency(tmp_path, max_batch):
    runner, session = make_runner(max_batch)
    nominal = max_batch / (BATCH_MS / 1e3)
    s = runner.run(
        short(target_qps=2 * nominal, max_duration_s=1.5), BatchPolicy(max_batch, 2.0), tmp_path
    )
    service_s = float(np.mean(session.took_s))
    assert service_s == pytest.approx(BATCH_MS / 1e3, rel=0.25)
    capacity = max_batch / service_s  # analytic: full batches back to back, nothing between
    assert s.scenario == "Server" and s.result in ("VALID", "INVALID")
    assert s.samples_per_second == pytest.approx(capacity, rel=0.10)
    assert s.extra["lost_queries"] == 0 and s.extra["duplicate_completions"] == 0
    assert s.extra["completed"] == s.extra["issued"] > 0
    assert max(session.batch_sizes) <= max_batch
    assert (tmp_path / SUMMARY_FILE).exists() and (tmp_path / "mlperf_log_detail.txt").exists()


# 12x the service time: a 10 qps load of 20 ms calls meets it unless the machine stalls the test
# for a quarter second (it failed once at 100 ms beside another test process on 2 cores)
LIGHT_LOAD_BOUND_MS = 250.0


def test_server_under_light_load_meets_the_bound(tmp_path):
    runner, _ = make_runner(1)
    s = runner.run(
        short(target_qps=10, latency_bound_ms=LIGHT_LOAD_BOUND_MS), BatchPolicy(1, 0.0), tmp_path
    )
    assert s.meets_bound(LIGHT_LOAD_BOUND_MS)
    assert BATCH_MS <= s.p99_ms < LIGHT_LOAD_BOUND_MS
    assert s.constraints["Performance constraints satisfied"]
    if not s.valid:  # a short run fails early stopping only, and LoadGen says why
        assert any("Early stopping" in r for r in s.reasons)


def test_offline_and_single_stream(tmp_path):
    """Offline: 8 samples per batch at what each batch really took (a busy machine oversleeps
    and adds time between calls, so the figure may fall below, never above, that capacity);
    SingleStream: the 90th percentile is at least the batch's own 90th percentile."""
    runner, session = make_runner(8)
    off = runner.run(
        short(scenario="Offline", target_qps=400), BatchPolicy(8, 0.0), tmp_path / "off"
    )
    capacity = 8 / float(np.mean(session.took_s))
    assert 0.6 * capacity <= off.samples_per_second <= 1.05 * capacity
    assert max(session.batch_sizes) == 8
    session.took_s.clear()
    single = runner.run(
        short(scenario="SingleStream", min_query_count=20, expected_latency_ms=BATCH_MS),
        BatchPolicy(1, 0.0),
        tmp_path / "ss",
    )
    took_p90_ms = float(np.percentile(session.took_s, 90)) * 1e3
    assert 0.95 * took_p90_ms <= single.p90_ms <= 1.5 * took_p90_ms + 5


def test_accuracy_mode_keeps_every_output(tmp_path):
    runner, _ = make_runner(4)
    s = runner.run(
        short(mode="accuracy", scenario="Offline", target_qps=100), BatchPolicy(4, 0.0), tmp_path
    )
    assert s.extra["lost_queries"] == 0
    assert sorted(runner.outputs) == list(range(16))
    np.testing.assert_allclose(runner.outputs[3][0], runner.library[3]["x"] * 2)
    logged = json.loads((tmp_path / "mlperf_log_accuracy.json").read_text())
    assert len(logged) == 16 and {e["qsl_idx"] for e in logged} == set(range(16))


def test_static_sessions_pad_to_the_next_loaded_size():
    small, big = FixedLatencySession(), FixedLatencySession()
    executor = BatchExecutor({2: small, 4: big}, INPUTS, dynamic=False)
    lib = SampleLibrary(INPUTS, 8)
    samples = [lib[i] for i in range(3)]
    outs = executor(samples)
    assert big.batch_sizes == [4] and small.batch_sizes == []
    assert len(outs) == 3
    for sample, out in zip(samples, outs, strict=True):
        np.testing.assert_allclose(out[0], sample["x"] * 2)
    with pytest.raises(InvalidParameter, match="batch"):
        executor([lib[0]] * 5)


def test_config_rejects_unknown_scenario():
    with pytest.raises(InvalidParameter, match="scenario"):
        LoadGenConfig(scenario="Batch")
