"""Pack mode for the BERT family as ByteMLPerf runs it, through the poprt double's PackRunner."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from kit.backends import BackendConfig
from kit.backends.ipu import IpuBackend
from kit.backends.ipu import backend as ipu_mod
from kit.measure.window import MeasureConfig
from tests.ipu_helpers import use_double


@pytest.fixture(scope="module")
def bert():
    from kit.models import export_model

    return export_model("bert-torch-fp32", small=True, opset=IpuBackend.export_opset)


def test_bert_runs_packed_on_unpadded_samples(monkeypatch, tmp_path, bert):
    import onnxruntime as ort

    use_double(monkeypatch)
    ipu_mod._AVAILABILITY.clear()
    session = IpuBackend().load(
        bert, BackendConfig("fp32", "ipu", options={"cache_dir": str(tmp_path)}), 1
    )
    d = session.description
    # what was compiled, not the PackRunner's get_execute_inputs() (one call's sample, dim 0 is 1)
    assert d["compiled_batch_size"] == 40 and d["runtime_config"] == "PackRunnerConfig"
    assert "first_fit" in d["pack_mode"]
    # fp32 here
    assert d["comparable"] is False and "runs bert-torch-fp32 at fp8 or fp16" in d["notes"][0]
    # Issue 29: the double packs samples into shared rows as the IPU does; issue 52: the export's
    # mask chain lets insert_attention_mask fire, its AttentionMask keeps them apart, the check sees
    # it
    assert d["passes"]["insert_attention_mask"]["applied"] == "yes"
    check = d["pack_check"]
    assert check["samples_kept_apart"] is True and check["max_abs"] <= check["tolerance"]
    assert len(check["lengths"]) == 8 and len(set(check["lengths"])) > 1
    assert not any("packed samples attend to each other" in n for n in d["notes"])
    assert not session.isolate  # so run() packs samples together, and its outputs stay right
    inputs = bert.make_inputs(3, seed=2)
    lengths = [384, 200, 17]
    for row, n in enumerate(lengths):  # padded samples: the PackRunner removes the padding
        inputs["attention_mask.1"][row, n:] = 0
        inputs["input_ids.1"][row, n:] = 0
    got = session.run(inputs)
    ref = ort.InferenceSession(str(bert.onnx_path), providers=["CPUExecutionProvider"]).run(
        None, inputs
    )
    for g, r in zip(got, ref, strict=True):
        for row, n in enumerate(lengths):
            np.testing.assert_allclose(g[row, :n], r[row, :n], atol=1e-4)
            assert not g[row, n:].any()
    m = session.measure_window(
        inputs, 1, MeasureConfig(warmup=2, min_duration_s=0.0, min_count=2), power=False
    )
    # int(pack batch 40 x 3.5) clients, as benchmark_pack
    assert m.mode == "pack" and m.threads == 140
    assert m.batch_size == 1 and m.extra["pack_batch_size"] == 40 and m.qps_bytemlperf > 0
    session.close()


@pytest.mark.parametrize(
    "version, calls", [("1.2.0", "get_model_outputs"), ("1.4.0", "get_execute_outputs")]
)
def test_pack_timing_inputs_are_benchmark_packs_population_unpadded(
    monkeypatch, tmp_path, bert, version, calls
):
    """Issue 29: 160 lengths (mean 186.6 against the population's 177.1) sent as padded rows plus
    position_ids; now pack batch x 100 lengths, unpadded, no position_ids, as benchmark_pack. Issue
    52: each PopRT release by its documented calls (1.1 / 1.2: executeAsync, the Runner's
    get_model_outputs; 1.3 and later: execute_async, get_execute_outputs, no get_model_*), the
    version recorded."""
    use_double(monkeypatch)
    monkeypatch.setenv("KIT_POPRT_DOUBLE_VERSION", version)
    ipu_mod._AVAILABILITY.clear()
    session = IpuBackend().load(
        bert, BackendConfig("fp16", "ipu", options={"cache_dir": str(tmp_path)}), 1
    )
    assert (
        session.description["poprt_version"].startswith(version)
        and session.description["compiled_batch_size"] == 40
    )
    assert calls in session.description["pack_output_buffers"]
    inputs = bert.make_inputs(2, seed=3)
    inputs["attention_mask.1"][1, 100:] = 0
    out = session.run(inputs)
    assert out[0].shape[0] == 2 and not out[0][1, 100:].any()
    m = session.measure_window(
        inputs, 1, MeasureConfig(warmup=1, min_duration_s=0.0, min_count=1), power=False
    )
    lengths = m.extra["pack_lengths"]
    assert lengths["count"] >= 100 * 40 and lengths["population_mean"] == pytest.approx(
        177.1, abs=0.05
    )
    assert lengths["mean"] == pytest.approx(lengths["population_mean"], rel=0.01)
    assert lengths["position_ids"].startswith("not sent")
    session.close()


def test_one_samples_output_buffers_by_each_releases_documented_calls():
    """Issue 52: ByteMLPerf sizes a sample's buffers as the model's outputs with dim 0 set to 1,
    which leaves one value of a 1-D output of batch x n values; and get_model_outputs is a Runner's
    only in PopRT 1.1 / 1.2 (from 1.3 get_execute_outputs describes one execute call, one
    sample)."""
    from kit.backends.ipu.poprt_worker.packing import sample_output_specs

    class Info:
        def __init__(self, name, shape):
            self.name, self.shape = name, shape

        def numpy_data_type(self):
            return np.float32

    class Runner12:
        def get_model_outputs(self):
            return [Info("logits", [40, 384, 2]), Info("flat", [40 * 384]), Info("pooled", [40])]

    class Runner14:
        def get_execute_outputs(self):
            return [Info("logits", [1, 384, 2]), Info("flat", [384])]

    specs, how = sample_output_specs(Runner12(), (1, 2), 40)
    assert [s[:2] for s in specs] == [("logits", [1, 384, 2]), ("flat", [384]), ("pooled", [1])]
    assert "get_model_outputs" in how
    specs, how = sample_output_specs(Runner14(), (1, 4), 40)
    assert [s[:2] for s in specs] == [
        ("logits", [1, 384, 2]),
        ("flat", [384]),
    ] and "get_execute_outputs" in how
    with pytest.raises(ValueError, match=r"\[7\] does not split into 40 samples"):
        sample_output_specs(
            type("R", (), {"get_model_outputs": lambda self: [Info("odd", [7])]})(), (1, 2), 40
        )


def test_pack_lengths_are_the_populations_and_stratified():
    from kit.backends.ipu.poprt_worker.packing import pack_lengths, population_mean

    rng = np.random.RandomState(0)
    independent = np.clip(rng.normal(172, 172, size=4_000_000).astype(np.int32), 1, 384)
    assert population_mean(172.0, 172.0, 384) == pytest.approx(independent.mean(), abs=0.15)
    for seed in range(5):
        drawn = pack_lengths(np.random.RandomState(seed), 172.0, 384, 4000)
        assert drawn.min() >= 1 and drawn.max() <= 384 and drawn.dtype == np.int32
        assert drawn.mean() == pytest.approx(177.1, rel=0.001)
        # the clipped mass
        assert (drawn == 1).mean() == pytest.approx((independent == 1).mean(), abs=0.01)


def test_the_worker_calls_whichever_async_spelling_the_runner_has():
    from kit.backends.ipu.poprt_worker import packing

    class Old:
        def executeAsync(self, feeds, outputs):  # noqa: N802 - PopRT 1.1/1.2's name
            return ("old", feeds, outputs)

    class New:
        def execute_async(self, feeds, outputs):
            return ("new", feeds, outputs)

    assert packing.execute_async(Old(), {"a": 1}, {})[0] == "old"
    assert packing.execute_async(New(), {"a": 1}, {})[0] == "new"
    with pytest.raises(AttributeError, match="neither execute_async nor executeAsync"):
        packing.execute_async(object(), {}, {})


def test_position_ids_input_replaces_the_position_embedding_indices(bert):
    from kit.backends.ipu.poprt_worker.convert import add_position_ids

    model = onnx.load(str(bert.onnx_path))
    add_position_ids(model, "position_ids", "input_ids.1")
    gather = next(n for n in model.graph.node if n.name.endswith("position_embeddings/Gather"))
    assert gather.input[1] == "position_ids" and "position_ids" in [
        i.name for i in model.graph.input
    ]
    # dead nodes removed
    assert not any(n.name.endswith("embeddings/Slice") for n in model.graph.node)
    onnx.checker.check_model(model)


@pytest.mark.parametrize("passes", [[], ["insert_attention_mask"]])
def test_packed_samples_sharing_a_row_mix_unless_run_one_per_pack(
    monkeypatch, tmp_path, bert, passes
):
    """What the pack check relies on: the double's PackRunner shares rows between samples (the k-th
    of a row marked k in the mask), so the plain BERT graph mixes them; run one per pack they match
    the reference, and with insert_attention_mask's AttentionMask they match it packed too."""
    import onnxruntime as ort

    use_double(monkeypatch)
    ipu_mod._AVAILABILITY.clear()
    config = BackendConfig(
        "fp32",
        "ipu",
        options={
            "cache_dir": str(tmp_path),
            "pack_check": False,
            "converter_options": {"used_passes": passes},
        },
    )
    session = IpuBackend().load(bert, config, 1)
    try:
        assert "pack_check" not in session.description
        inputs = bert.make_inputs(2, seed=5)
        for row, n in enumerate([150, 120]):  # both fit one 384-token row
            inputs["attention_mask.1"][row, n:] = 0
        ref = ort.InferenceSession(str(bert.onnx_path), providers=["CPUExecutionProvider"]).run(
            None, inputs
        )
        mixed = session.run_packed(inputs, isolate=False)
        apart = session.run_packed(inputs, isolate=True)
    finally:
        session.close()
    for row, n in enumerate([150, 120]):
        np.testing.assert_allclose(apart[0][row, :n], ref[0][row, :n], atol=1e-4)
    # mixed: differs
    assert np.allclose(mixed[0][0, :150], ref[0][0, :150], atol=1e-4) == bool(passes)
    if passes:
        np.testing.assert_allclose(mixed[0][1, :120], ref[0][1, :120], atol=1e-4)


def test_roberta_times_packed_on_the_double_with_its_one_token_type(monkeypatch, tmp_path):
    """benchmark_pack's all-ones samples gave RoBERTa token type 1 of a one-row embedding table: the
    double (ONNX Runtime) refused every timed call, so the RoBERTa IPU row always failed there."""
    from kit.models import export_model

    roberta = export_model("roberta-torch-fp32", small=True, opset=IpuBackend.export_opset)
    use_double(monkeypatch)
    ipu_mod._AVAILABILITY.clear()
    session = IpuBackend().load(
        roberta, BackendConfig("fp32", "ipu", options={"cache_dir": str(tmp_path)}), 1
    )
    try:
        m = session.measure_window(
            roberta.make_inputs(1, seed=0),
            1,
            MeasureConfig(warmup=1, min_duration_s=0.0, min_count=2),
            power=False,
        )
    finally:
        session.close()
    assert m.mode == "pack" and m.samples > 0
    assert m.extra["pack_fill"] == {"token_type_ids.1": 0}  # the others hold benchmark_pack's ones


def test_packed_outputs_that_overflow_are_not_samples_kept_apart():
    """A graph that reads the PackRunner's 1, 2, ... mask as 1/0 can overflow (NaN/Inf); the diff
    zeroes those, so they must not pass as "kept apart"."""
    from kit.backends.ipu.pack import check_packing

    class Model:
        def make_inputs(self, n, seed=0):
            return {"ids": np.ones((n, 16), np.int64), "mask": np.ones((n, 16), np.int64)}

    class Session:
        pack = {
            "mask_name": "mask",
            "batch_size": 4,
            "input_names": ["ids", "mask"],
            "benchmark": {"max_valid_seq": 16, "avg_len": 8.0},
        }
        description: dict = {}
        isolate = False

        def run_packed(self, inputs, isolate):
            out = np.zeros((4, 16), np.float32)
            return [out if isolate else np.full_like(out, np.nan)]

    session = Session()
    check = check_packing(session, Model(), "fp32")
    assert check["samples_kept_apart"] is False and session.isolate
    assert session.description["comparable"] is False
    assert session.description["not_comparable_codes"] == ["packed_attention"]
