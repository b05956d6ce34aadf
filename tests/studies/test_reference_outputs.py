"""Issue 50: the fp32 reference's outputs computed once per model, batch and inputs: the row's
measurement takes what the search's numerics gate computed instead of loading and running ONNX
Runtime fp32 again."""

from __future__ import annotations

import numpy as np
import pytest

from kit.backends import BackendConfig, reference_outputs, require_backend
from kit.studies import model_benchmark

RUN = dict(
    small=True,
    backend="onnxruntime",
    precision="fp16",
    device="cpu",
    batch_sizes=[1],
    search=False,
    check_numerics=True,
    accuracy=False,
    roofline=False,
    warmup=0,
    min_duration_s=0.01,
    min_count=2,
)


@pytest.fixture
def reference_loads(small, outputs, monkeypatch):
    """The precisions ONNX Runtime loads in the run, in order."""
    monkeypatch.setattr(model_benchmark, "load_model", lambda *a, **k: small)
    backend = type(require_backend("onnxruntime"))
    load, loads = backend.load, []

    def counted(self, model, cfg, batch, *a, **k):
        loads.append(cfg.precision)
        return load(self, model, cfg, batch, *a, **k)

    monkeypatch.setattr(backend, "load", counted)
    reference_outputs.forget()
    yield loads
    reference_outputs.forget()


def fp32_outputs(model, inputs):
    session = require_backend("onnxruntime").load(model, BackendConfig("fp32", "cpu"), 1)
    try:
        return session.run(inputs)
    finally:
        session.close()


def test_the_measurement_takes_the_outputs_the_search_computed_on_the_same_inputs(
    small, reference_loads
):
    fresh = model_benchmark.run(dict(model=small.name, **RUN))
    assert (
        reference_loads == ["fp16", "fp32"]
        and "from the search" not in fresh.numerics[0].more["reference"]
    )

    inputs = small.make_inputs(1, seed=0)
    # what the search leaves
    reference_outputs.remember(small, 1, inputs, fp32_outputs(small, inputs))
    reference_loads.clear()
    reused = model_benchmark.run(dict(model=small.name, **RUN))
    assert reference_loads == ["fp16"]  # no second fp32 session
    assert "from the search's call on the same inputs" in reused.numerics[0].more["reference"]
    assert reused.numerics[0].mean_abs == pytest.approx(fresh.numerics[0].mean_abs, rel=1e-6)
    assert reused.numerics[0].max_abs == pytest.approx(fresh.numerics[0].max_abs, rel=1e-6)


def test_other_inputs_or_another_batch_are_never_taken(small, reference_loads):
    inputs = small.make_inputs(1, seed=0)
    other = {name: np.ascontiguousarray(a + 1) for name, a in inputs.items()}
    reference_outputs.remember(small, 1, other, fp32_outputs(small, other))
    reference_outputs.remember(small, 2, inputs, fp32_outputs(small, inputs))
    assert reference_outputs.recall(small, 1, inputs) is None
    reference_loads.clear()
    model_benchmark.run(dict(model=small.name, **RUN))
    assert reference_loads == ["fp16", "fp32"]


def test_no_reference_session_is_open_while_the_windows_run(small, reference_loads, monkeypatch):
    """The reference the numerics check loaded is closed before the timed windows; where the
    accuracy check needs one, it is loaded when that check first calls it, after them."""
    events: list[str] = []
    backend = type(require_backend("onnxruntime"))
    counted = backend.load

    def watched(self, model, cfg, batch, *a, **k):
        session = counted(self, model, cfg, batch, *a, **k)
        close = session.close

        def closing():
            events.append(f"close {cfg.precision}")
            close()

        session.close = closing
        return session

    monkeypatch.setattr(backend, "load", watched)
    timed = model_benchmark.timed_sessions
    monkeypatch.setattr(
        model_benchmark, "timed_sessions", lambda *a, **k: events.append("timing") or timed(*a, **k)
    )
    model_benchmark.run(dict(model=small.name, **RUN))
    assert events.index("close fp32") < events.index("timing")

    inputs = small.make_inputs(1, seed=0)
    reference_outputs.remember(small, 1, inputs, fp32_outputs(small, inputs))
    reference_loads.clear()
    model_benchmark.run(dict(model=small.name, **{**RUN, "accuracy": True}))
    # no ImageNet here: the accuracy check never called the reference
    assert reference_loads == ["fp16"]
