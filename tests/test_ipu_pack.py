"""Pack mode for the BERT family as ByteMLPerf runs it, through the poprt double's PackRunner."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from kit.backends import BackendConfig
from kit.backends import ipu as ipu_mod
from kit.backends.ipu import IpuBackend
from kit.measure.window import MeasureConfig
from tests.ipu_helpers import use_double


@pytest.fixture(scope="module")
def bert():
    from kit.models import export_model

    return export_model("bert-torch-fp32", small=True)


def test_bert_runs_packed_on_unpadded_samples(monkeypatch, tmp_path, bert):
    import onnxruntime as ort

    use_double(monkeypatch)
    ipu_mod._AVAILABILITY.clear()
    session = IpuBackend().load(bert, BackendConfig("fp32", "ipu", options={"cache_dir": str(tmp_path)}), 1)
    d = session.description
    assert d["compiled_batch_size"] == 40 and d["runtime_config"] == "PackRunnerConfig"
    assert "first_fit" in d["pack_mode"]
    assert d["comparable"] is False and "runs bert-torch-fp32 at fp8 or fp16" in d["notes"][0]  # fp32 here
    inputs = bert.make_inputs(3, seed=2)
    lengths = [384, 200, 17]
    for row, n in enumerate(lengths):  # padded samples: the PackRunner removes the padding
        inputs["attention_mask.1"][row, n:] = 0
        inputs["input_ids.1"][row, n:] = 0
    got = session.run(inputs)
    ref = ort.InferenceSession(str(bert.onnx_path), providers=["CPUExecutionProvider"]).run(None, inputs)
    for g, r in zip(got, ref, strict=True):
        for row, n in enumerate(lengths):
            np.testing.assert_allclose(g[row, :n], r[row, :n], atol=1e-4)
            assert not g[row, n:].any()
    m = session.measure_window(inputs, 1, MeasureConfig(warmup=2, min_duration_s=0.0, min_count=2), power=False)
    assert m.mode == "pack" and m.threads == 140  # int(pack batch 40 x 3.5) clients, as benchmark_pack
    assert m.batch_size == 1 and m.extra["pack_batch_size"] == 40 and m.qps_bytemlperf > 0
    session.close()


def test_position_ids_input_replaces_the_position_embedding_indices(bert):
    from kit.backends.ipu_worker import add_position_ids

    model = onnx.load(str(bert.onnx_path))
    add_position_ids(model, "position_ids", "input_ids.1")
    gather = next(n for n in model.graph.node if n.name.endswith("position_embeddings/Gather"))
    assert gather.input[1] == "position_ids" and "position_ids" in [i.name for i in model.graph.input]
    assert not any(n.name.endswith("embeddings/Slice") for n in model.graph.node)  # dead nodes removed
    onnx.checker.check_model(model)
