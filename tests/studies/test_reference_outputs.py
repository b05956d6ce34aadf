"""Issue 50: the fp32 reference's outputs computed once per model, batch and inputs: the row's
measurement takes what the search's numerics gate computed instead of loading and running ONNX
Runtime fp32 again."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from kit.backends import BackendConfig, Placement, reference_outputs, require_backend
from kit.errors import InvalidParameter
from kit.results.windows import Noise
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


SEARCH = "the search's call on the same inputs"


def fp32_outputs(model, inputs):
    batch = len(next(iter(inputs.values())))
    session = require_backend("onnxruntime").load(model, BackendConfig("fp32", "cpu"), batch)
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
    reference_outputs.remember(small, 1, inputs, fp32_outputs(small, inputs), SEARCH)
    reference_loads.clear()
    reused = model_benchmark.run(dict(model=small.name, **RUN))
    assert reference_loads == ["fp16"]  # no second fp32 session
    assert "from the search's call on the same inputs" in reused.numerics[0].more["reference"]
    assert reused.numerics[0].mean_abs == pytest.approx(fresh.numerics[0].mean_abs, rel=1e-6)
    assert reused.numerics[0].max_abs == pytest.approx(fresh.numerics[0].max_abs, rel=1e-6)


def test_other_inputs_or_another_batch_are_never_taken(small, reference_loads):
    inputs = small.make_inputs(1, seed=0)
    other = {name: np.ascontiguousarray(a + 1) for name, a in inputs.items()}
    reference_outputs.remember(small, 1, other, fp32_outputs(small, other), SEARCH)
    reference_outputs.remember(small, 2, inputs, fp32_outputs(small, inputs), SEARCH)
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
    reference_outputs.remember(small, 1, inputs, fp32_outputs(small, inputs), SEARCH)
    reference_loads.clear()
    model_benchmark.run(dict(model=small.name, **{**RUN, "accuracy": True}))
    # no ImageNet here: the accuracy check never called the reference
    assert reference_loads == ["fp16"]


def test_a_later_run_reads_the_reference_from_disk_instead_of_computing_it(
    small, reference_loads, reference_cache
):
    """A warm rerun (a new process: nothing in memory) on the same export, batch and inputs loads
    no ONNX Runtime fp32 session, and its numerics are the fresh run's."""
    fresh = model_benchmark.run(dict(model=small.name, **RUN))
    assert reference_loads == ["fp16", "fp32"] and len(list(reference_cache.glob("*.npz"))) == 1
    reference_outputs.forget()
    reference_loads.clear()
    warm = model_benchmark.run(dict(model=small.name, **RUN))
    assert reference_loads == ["fp16"]
    assert "an earlier call on the same export and inputs" in warm.numerics[0].more["reference"]
    assert warm.numerics[0].mean_abs == fresh.numerics[0].mean_abs
    assert warm.numerics[0].max_abs == fresh.numerics[0].max_abs
    compile_phase = next(p for p in warm.tables.time_account.phases if p.phase == "compile")
    assert "taken from an earlier call" in compile_phase.detail


def written(small, inputs, batch=1):
    reference_outputs.remember(small, batch, inputs, fp32_outputs(small, inputs), SEARCH)
    reference_outputs.forget()


def test_a_disk_entry_is_taken_only_for_the_same_export_inputs_batch_onnxruntime_and_cpu(
    small, reference_cache, tmp_path, monkeypatch
):
    inputs = small.make_inputs(1, seed=0)
    written(small, inputs)
    found = reference_outputs.recall(small, 1, inputs)
    assert found is not None and np.array_equal(found.outputs[0], fp32_outputs(small, inputs)[0])

    other = {name: np.ascontiguousarray(a + 1) for name, a in inputs.items()}
    assert reference_outputs.recall(small, 1, other) is None
    assert reference_outputs.recall(small, 2, inputs) is None
    copy = tmp_path / "copy.onnx"
    copy.write_bytes(small.onnx_path.read_bytes())
    moved = replace(small, onnx_path=copy)
    assert reference_outputs.recall(moved, 1, inputs) is not None  # the same content elsewhere
    copy.write_bytes(small.onnx_path.read_bytes() + b"\0")
    assert reference_outputs.recall(moved, 1, inputs) is None  # the export changed
    for name, other_value in [
        ("onnxruntime_version", lambda: "0.0.1"),
        ("cpu_model", lambda: "another CPU"),
        ("cpu_flags", lambda: frozenset({"avx2"})),  # the same name, AVX-512 hidden by a VM
    ]:
        with monkeypatch.context() as m:
            m.setattr(reference_outputs, name, other_value)
            assert reference_outputs.recall(small, 1, inputs) is None, name
    assert reference_outputs.recall(small, 1, inputs) is not None


@pytest.mark.parametrize("damage", ["truncate", "flip"])
def test_a_damaged_disk_entry_is_computed_again(small, reference_loads, reference_cache, damage):
    fresh = model_benchmark.run(dict(model=small.name, **RUN))
    (entry,) = reference_cache.glob("*.npz")
    data = bytearray(entry.read_bytes())
    if damage == "truncate":
        del data[len(data) // 2 :]
    else:
        data[-40] ^= 0xFF
    entry.write_bytes(bytes(data))
    reference_outputs.forget()
    reference_loads.clear()
    from kit.cache import CacheRebuilt

    with pytest.warns(CacheRebuilt, match=entry.name):
        again = model_benchmark.run(dict(model=small.name, **RUN))
    assert reference_loads == ["fp16", "fp32"]
    assert again.numerics[0].mean_abs == pytest.approx(fresh.numerics[0].mean_abs, rel=1e-6)
    assert reference_outputs.recall(small, 1, small.make_inputs(1, seed=0)) is not None


def test_kit_reference_cache_0_keeps_nothing_on_disk_and_a_file_is_refused(
    small, reference_loads, outputs, monkeypatch, tmp_path
):
    monkeypatch.setenv("KIT_REFERENCE_CACHE", "0")
    model_benchmark.run(dict(model=small.name, **RUN))
    reference_outputs.forget()
    reference_loads.clear()
    model_benchmark.run(dict(model=small.name, **RUN))
    assert reference_loads == ["fp16", "fp32"]
    assert not list(outputs.rglob("*.npz"))

    monkeypatch.setenv("KIT_REFERENCE_CACHE", "")
    default = reference_outputs.store()
    assert default is not None and default.name == "reference-outputs"
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("x")
    for wrong in (str(not_a_folder), "off", "relative/folder"):
        monkeypatch.setenv("KIT_REFERENCE_CACHE", wrong)
        with pytest.raises(InvalidParameter, match="KIT_REFERENCE_CACHE.*0 .*1 .*absolute folder"):
            reference_outputs.store()


def test_a_search_where_the_reference_is_no_candidate_reads_it_from_disk(
    small, reference_loads, outputs, monkeypatch
):
    """On a GPU ONNX Runtime fp32 on the CPU is no candidate: a second search (its decision not
    cached, e.g. a new search version) takes the reference from disk and gates alike."""
    from kit.search import row
    from kit.search.candidates import RowCandidate
    from kit.search.precision_map import PrecisionChoice

    monkeypatch.setattr(
        row,
        "today_plan",
        lambda *a: PrecisionChoice(Placement("onnxruntime", "fp16", "cpu"), "pinned"),
    )
    monkeypatch.setattr(row, "idle_sample", lambda: Noise())
    settings = row.SearchSettings("quick", probe_s=0.05, min_count=2, warmup=0)
    candidates = [RowCandidate.of("onnxruntime", "fp16", native=False)]
    first = row.search_row(small, "FP16", 1, "cpu", settings, candidates=candidates)
    assert reference_loads.count("fp32") == 1
    reference_outputs.forget()
    reference_loads.clear()
    second = row.search_row(small, "FP16", 1, "cpu", settings, candidates=candidates)
    assert "fp32" not in reference_loads
    assert [p.numerics for p in second.probes] == [p.numerics for p in first.probes]


def test_kit_reproduce_refuses_a_wrong_kit_reference_cache_before_any_job(
    outputs, monkeypatch, capsys
):
    from kit.cli.main import main as kit_main

    monkeypatch.setenv("KIT_REFERENCE_CACHE", "off")
    assert kit_main(["reproduce", "--hardware", "cpu", "--only", "summary"]) == 2
    err = capsys.readouterr().err
    assert "KIT_REFERENCE_CACHE='off'" in err and "absolute folder path" in err
    assert not (outputs / "runs").exists()


def test_a_cache_folder_that_cannot_be_written_costs_a_warning_not_the_row(
    small, reference_loads, tmp_path, monkeypatch
):
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the folder's parent should be")
    monkeypatch.setenv("KIT_REFERENCE_CACHE", str(blocked / "reference-outputs"))
    with pytest.warns(UserWarning, match="not kept on disk"):
        result = model_benchmark.run(dict(model=small.name, **RUN))
    assert str(result.status) == "ok" and result.numerics[0].mean_abs is not None
    reference_outputs.forget()
    reference_loads.clear()
    with pytest.warns(UserWarning, match="not kept on disk"):
        model_benchmark.run(dict(model=small.name, **RUN))
    assert reference_loads == ["fp16", "fp32"]  # computed again, as without a cache


def two_output_model(folder, external: bool = False):
    """A user's ONNX file with two outputs of different shapes (y = x W, s = x v: the row sums of
    x), its weights in an external data file where `external`."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from kit.models.onnx_file import load_onnx_file

    weight = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(4, 3), "w")
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "w"], ["y"]),
            helper.make_node("MatMul", ["x", "v"], ["s"]),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3]),
            helper.make_tensor_value_info("s", TensorProto.FLOAT, ["N", 1]),
        ],
        [weight, numpy_helper.from_array(np.ones((4, 1), dtype=np.float32), "v")],
    )
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    proto.ir_version = 10
    path = folder / "two.onnx"
    if external:
        onnx.save(
            proto, str(path), save_as_external_data=True, location="two.data", size_threshold=0
        )
    else:
        onnx.save(proto, str(path))
    return load_onnx_file(path)


def test_outputs_come_back_in_their_order_and_an_external_weight_change_is_a_new_entry(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)  # ONNX Runtime reads the external data beside the model
    model = two_output_model(tmp_path, external=True)
    inputs = model.make_inputs(2)
    fresh = fp32_outputs(model, inputs)
    assert [o.shape for o in fresh] == [(2, 3), (2, 1)]
    written(model, inputs, batch=2)
    found = reference_outputs.recall(model, 2, inputs)
    assert found is not None and [o.shape for o in found.outputs] == [(2, 3), (2, 1)]
    assert all(np.array_equal(a, b) for a, b in zip(found.outputs, fresh, strict=True))

    data = tmp_path / "two.data"
    weights = np.frombuffer(data.read_bytes(), dtype=np.float32) * 2
    data.write_bytes(weights.tobytes())  # the .onnx itself is byte for byte the same
    assert reference_outputs.recall(model, 2, inputs) is None
    assert not np.array_equal(fp32_outputs(model, inputs)[0], fresh[0])


def test_each_path_names_where_its_reference_came_from(small, reference_loads, reference_cache):
    """Computed; read from this process's earlier numerics check; read from disk; no numerics
    check (nothing read, nothing claimed); the run being the reference itself."""
    first = model_benchmark.run(dict(model=small.name, **RUN))
    assert first.numerics[0].more["reference"] == "onnxruntime fp32 CPU"
    second = model_benchmark.run(dict(model=small.name, **RUN))
    assert "an earlier numerics check on the same inputs" in second.numerics[0].more["reference"]
    reference_outputs.forget()
    third = model_benchmark.run(dict(model=small.name, **RUN))
    assert "an earlier call on the same export and inputs" in third.numerics[0].more["reference"]
    numerics = next(p for p in third.tables.time_account.phases if p.phase == "numerics")
    assert "the reference's outputs read" in numerics.detail

    unchecked = model_benchmark.run(
        dict(model=small.name, **{**RUN, "check_numerics": False, "accuracy": True})
    )
    compile_phase = next(p for p in unchecked.tables.time_account.phases if p.phase == "compile")
    assert "taken from" not in compile_phase.detail and not unchecked.numerics

    itself = model_benchmark.run(dict(model=small.name, **{**RUN, "precision": "fp32"}))
    assert itself.numerics[0].more["reference"].endswith("(this run is the reference)")
    compile_phase = next(p for p in itself.tables.time_account.phases if p.phase == "compile")
    assert "taken from" not in compile_phase.detail


def test_a_damaged_entry_in_a_cache_that_cannot_be_written_costs_a_warning_not_the_row(
    small, reference_loads, reference_cache, monkeypatch
):
    """A shared, read-only cache: the damaged entry cannot be deleted (root ignores file modes
    here, so the read-only mount is the refusal itself)."""
    model_benchmark.run(dict(model=small.name, **RUN))
    (entry,) = reference_cache.glob("*.npz")
    entry.write_bytes(entry.read_bytes()[:100])
    reference_outputs.forget()
    reference_loads.clear()

    def read_only(path, reason):
        raise OSError(30, "Read-only file system", str(path))

    monkeypatch.setattr(reference_outputs.cache, "discard", read_only)
    with pytest.warns(UserWarning, match="could not be read"):
        result = model_benchmark.run(dict(model=small.name, **RUN))
    assert str(result.status) == "ok" and reference_loads == ["fp16", "fp32"]


def test_a_model_name_that_leads_out_of_the_folder_is_refused(small, reference_cache):
    escaping = replace(small, name="../../escaped")
    inputs = small.make_inputs(1, seed=0)
    with pytest.raises(InvalidParameter, match="escaped.*a path inside"):
        reference_outputs.remember(escaping, 1, inputs, fp32_outputs(small, inputs), SEARCH)
    assert not list(reference_cache.parent.parent.rglob("*escaped*"))


def test_the_folder_stays_under_its_cap_by_deleting_the_least_recently_used_entry(
    small, reference_cache, monkeypatch
):
    """A read counts as a use: the entry a rerun keeps reading outlives a newer one never read."""
    import os

    inputs = {b: small.make_inputs(b, seed=0) for b in (1, 2, 3)}
    written(small, inputs[1], batch=1)
    written(small, inputs[3], batch=3)
    first, third = (next(reference_cache.glob(f"*-b{b}-*.npz")) for b in (1, 3))
    os.utime(first, ns=(10**9, 10**9))
    os.utime(third, ns=(2 * 10**9, 2 * 10**9))  # written after the first
    monkeypatch.setattr(
        reference_outputs, "FOLDER_CAP_BYTES", first.stat().st_size + third.stat().st_size
    )
    assert reference_outputs.recall(small, 1, inputs[1]) is not None  # the first used again
    written(small, inputs[2], batch=2)  # past the cap: the third, least recently used, goes
    assert sorted(p.name.split("-b")[-1][0] for p in reference_cache.glob("*.npz")) == ["1", "2"]
    assert not list(reference_cache.glob("*-b3-*.json"))  # with its metadata
    assert reference_outputs.recall(small, 3, inputs[3]) is None
    assert reference_outputs.recall(small, 1, inputs[1]) is not None


def test_a_mean_diff_row_compares_with_a_reference_loaded_after_the_windows_when_recalled(
    small, reference_loads, reference_cache, monkeypatch
):
    """Mean Diff (CLIP, Conformer) runs the fp32 reference over its fake dataset. The first run
    loads the reference for numerics; the second recalls its outputs, so the compile phase loads
    none and the accuracy check loads one after the timed windows."""
    clip = replace(small, name="clip-onnx-fp32")
    monkeypatch.setattr(model_benchmark, "load_model", lambda *a, **k: clip)
    run = dict(model=clip.name, **{**RUN, "accuracy": True, "data_percent": 1})
    for expected_compile in ("and the onnxruntime fp32 CPU reference", "the reference's outputs"):
        reference_loads.clear()
        result = model_benchmark.run(run)
        (check,) = result.accuracy
        assert check.metric == "Mean Diff" and check.value is not None and check.value > 0
        assert check.code == "random_weights" and reference_loads == ["fp16", "fp32"]
        compile_phase = next(p for p in result.tables.time_account.phases if p.phase == "compile")
        assert expected_compile in compile_phase.detail
    assert "fp32 CPU reference" not in compile_phase.detail
