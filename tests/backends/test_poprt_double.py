"""The poprt test double refuses what the real PopRT refuses (so the kit's IPU code is held to
the documented API), and accepts the documented flow."""

from __future__ import annotations

import threading
import time

import numpy as np
import onnx
import pytest

from tests.ipu_helpers import FAST_DOUBLE, tiny_model


@pytest.fixture
def runner(poprt, tmp_path):
    model = onnx.load(str(tiny_model(tmp_path / "tiny.onnx")))
    converted = poprt.converter.Converter(input_shape={"x": [2, 4], "ids": [2, 3]}).convert(model)
    path = str(tmp_path / "m.popef")
    poprt.compiler.Compiler.compile_and_export(
        converted.SerializeToString(), ["y", "z"], path, poprt.compiler.CompilerOptions()
    )
    return poprt.runtime.Runner(path, poprt.runtime.RuntimeConfig())


def compiled(poprt, tmp_path, precision="fp32", **options):
    model = onnx.load(str(tiny_model(tmp_path / "tiny.onnx")))
    converted = poprt.converter.Converter(
        input_shape={"x": [2, 4], "ids": [2, 3]},
        precision=precision,
        **({"fp8_params": "F143,F143,-3,-3"} if precision == "fp8" else {}),
    ).convert(model)
    opts = poprt.compiler.CompilerOptions()
    for name, value in options.items():
        setattr(opts, name, value)
    return poprt.compiler.Compiler.compile(converted, ["y", "z"], opts)


def feeds_for(runner):
    feeds = {i.name: np.ones(i.shape, i.numpy_data_type()) for i in runner.get_execute_inputs()}
    return feeds, {
        o.name: np.zeros(o.shape, o.numpy_data_type()) for o in runner.get_execute_outputs()
    }


def test_identifies_itself(poprt):
    assert poprt.__kit_test_double__ is True


def test_converter_rejects_bad_keywords_and_values(poprt):
    Converter = poprt.converter.Converter
    with pytest.raises(TypeError, match="unexpected keyword argument 'precison'"):
        Converter(precison="fp16")
    with pytest.raises(TypeError, match="positional"):
        Converter("fp16")
    with pytest.raises(ValueError, match="precision 'int8'"):
        Converter(precision="int8")
    with pytest.raises(ValueError, match="fp8_params"):
        Converter(precision="fp8", fp8_params="E4M3,-3")
    with pytest.raises(TypeError, match="input_shape"):
        Converter(input_shape={"x": [0, 4]})
    with pytest.raises(TypeError, match="ModelProto"):
        Converter().convert(b"not a model")


def test_converter_checks_input_names(poprt, tmp_path):
    model = onnx.load(str(tiny_model(tmp_path / "t.onnx")))
    with pytest.raises(ValueError, match="not model inputs"):
        poprt.converter.Converter(input_shape={"input": [2, 4]}).convert(model)
    with pytest.raises(ValueError, match="dynamic shape"):
        poprt.converter.Converter(input_shape={"x": [2, 4]}).convert(model)


def test_compiler_options_are_typed(poprt):
    opts = poprt.compiler.CompilerOptions()
    with pytest.raises(AttributeError, match="num_iotiles"):
        opts.num_iotiles = 32  # ByteMLPerf's JSON key; the attribute is num_io_tiles
    with pytest.raises(TypeError):
        opts.batches_per_step = 1.5
    with pytest.raises(ValueError):
        opts.partials_type = "fp16"
    opts.available_memory_proportion = 1  # ints widen to float, as with pybind11
    assert opts.available_memory_proportion == 1.0


def test_compile_needs_static_shapes_and_real_outputs(poprt, tmp_path):
    model = onnx.load(str(tiny_model(tmp_path / "t.onnx")))
    with pytest.raises(RuntimeError, match="dynamic shape"):
        poprt.compiler.Compiler.compile(model, ["y"])
    fixed = poprt.converter.Converter(input_shape={"x": [1, 4], "ids": [1, 3]}).convert(model)
    with pytest.raises(RuntimeError, match="not graph outputs"):
        poprt.compiler.Compiler.compile(fixed, ["logits"])


def test_runner_accepts_only_popef(poprt, tmp_path):
    junk = tmp_path / "x.popef"
    junk.write_bytes(b"onnx bytes")
    with pytest.raises(RuntimeError, match="not a PopEF"):
        poprt.runtime.Runner(str(junk))
    with pytest.raises(TypeError, match="config"):
        poprt.runtime.Runner(str(junk), {"timeout_ns": 0})
    with pytest.raises(TypeError, match="timeout_ns"):
        poprt.runtime.RuntimeConfig().timeout_ns = -1


def test_documented_defaults(poprt):
    assert poprt.compiler.CompilerOptions().enable_prefetch_datastreams is True
    assert poprt.compiler.CompilerOptions().num_io_tiles == 0
    assert poprt.runtime.RuntimeConfig().timeout_ns == 10_000_000  # 10 ms; 0 = wait forever
    assert poprt.runtime.PackRunnerConfig().algorithm == poprt.runtime.PackAlgorithm.next_fit


def test_unregistered_pass_is_refused(poprt):
    poprt.converter.Converter(used_passes=["insert_attention_mask", "fused_attention"])
    with pytest.raises(KeyError, match="'deberta_pack' is not registered"):
        poprt.converter.Converter(used_passes=["deberta_pack"])


def test_skip_passes_is_a_str_as_documented(poprt):
    """Issue 52: PopRT documents `skip_passes (str)` beside `used_passes (List[str])`; the kit
    passed a list, which a real Converter would refuse."""
    converter = poprt.converter.Converter(skip_passes="eliminate_nop_cast, replace_div_with_mul")
    assert converter.skipped == ["eliminate_nop_cast", "replace_div_with_mul"]
    with pytest.raises(
        TypeError, match=r"skip_passes must be str .* got list \['eliminate_nop_cast'\]"
    ):
        poprt.converter.Converter(skip_passes=["eliminate_nop_cast"])
    with pytest.raises(TypeError, match="used_passes must be List"):
        poprt.converter.Converter(used_passes="remove_input_cast")
    with pytest.raises(KeyError, match="'deberta_pack' is not registered"):
        poprt.converter.Converter(skip_passes="deberta_pack")


def test_fp8_is_refused_on_ipu2(poprt, tmp_path, monkeypatch):
    compiled(poprt, tmp_path, "fp8")  # a C600 compiles fp8
    monkeypatch.setenv("KIT_POPRT_DOUBLE_IPU_VERSION", "ipu2")
    with pytest.raises(RuntimeError, match="FP8 is not supported on ipu2"):
        compiled(poprt, tmp_path, "fp8")


def test_popef_for_another_ipu_version_does_not_load(poprt, tmp_path, monkeypatch):
    exe = compiled(poprt, tmp_path)
    monkeypatch.setenv("KIT_POPRT_DOUBLE_IPU_VERSION", "ipu2")
    with pytest.raises(RuntimeError, match="compiled for ipu21, the device is ipu2"):
        poprt.runtime.Runner(exe)


def test_one_ipu_one_runner_and_the_attach_delay(poprt, tmp_path, monkeypatch):
    monkeypatch.setenv("KIT_POPRT_DOUBLE_ATTACH_S", "0.1")
    exe = compiled(poprt, tmp_path)
    started = time.perf_counter()
    first = poprt.runtime.Runner(exe)
    assert time.perf_counter() - started >= 0.1
    started = time.perf_counter()
    with pytest.raises(RuntimeError, match="all 1 device.*in use"):
        poprt.runtime.Runner(exe)
    assert time.perf_counter() - started >= float(FAST_DOUBLE["KIT_POPRT_DOUBLE_ATTACH_WAIT_S"])
    del first
    poprt.runtime.Runner(exe)  # the device is free again


def test_clients_share_the_ipu_serially(poprt, tmp_path):
    runner = poprt.runtime.Runner(compiled(poprt, tmp_path))
    active, peak, real_run = [0], [0], runner._session.run

    def slow_run(*args):
        active[0] += 1
        peak[0] = max(peak[0], active[0])
        time.sleep(0.005)
        active[0] -= 1
        return real_run(*args)

    runner._session.run = slow_run
    threads = [
        threading.Thread(target=lambda: [runner.execute(*feeds_for(runner)) for _ in range(5)])
        for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert peak[0] == 1


def test_timeout_zero_with_io_tiles_and_one_request_is_an_error(poprt, tmp_path):
    runner = poprt.runtime.Runner(compiled(poprt, tmp_path, num_io_tiles=32, batches_per_step=128))
    feeds, outs = feeds_for(runner)
    started = time.perf_counter()
    runner.execute(feeds, outs)  # default timeout_ns (10 ms): the IPU flushes and the call returns
    assert time.perf_counter() - started >= 0.01
    del runner
    config = poprt.runtime.RuntimeConfig()
    config.timeout_ns = 0
    runner = poprt.runtime.Runner(compiled(poprt, tmp_path, num_io_tiles=32), config)
    with pytest.raises(TimeoutError, match="timeout_ns = 0 means wait forever"):
        runner.execute(feeds, outs)


def test_execute_enforces_names_shapes_dtypes(runner):
    infos = {i.name: i for i in runner.get_execute_inputs()}
    assert infos["ids"].numpy_data_type() == np.int32 and infos["x"].shape == [2, 4]
    feeds = {n: np.ones(i.shape, i.numpy_data_type()) for n, i in infos.items()}
    outs = {o.name: np.zeros(o.shape, o.numpy_data_type()) for o in runner.get_execute_outputs()}
    runner.execute(feeds, outs)
    assert outs["z"][0, 0] == 2.0
    with pytest.raises(RuntimeError, match="names"):
        runner.execute({"input": feeds["x"], "ids": feeds["ids"]}, outs)
    with pytest.raises(RuntimeError, match="shape"):
        runner.execute({**feeds, "x": np.ones((3, 4), np.float32)}, outs)
    with pytest.raises(RuntimeError, match="dtype"):
        runner.execute({**feeds, "ids": np.ones((2, 3), np.int64)}, outs)
    with pytest.raises(RuntimeError, match="output 'y' has shape"):
        runner.execute(feeds, {**outs, "y": np.zeros((1, 3), np.float32)})
    with pytest.raises(TypeError):
        runner.execute(list(feeds.values()), outs)
    runner.execute_async(feeds, outs).wait()


def test_an_fp8_skip_name_that_is_no_node_is_refused(poprt, tmp_path):
    """Issue 29: the double took any name, so a skip that PopRT may ignore passed unseen."""
    model = onnx.load(str(tiny_model(tmp_path / "tiny.onnx")))
    for i, node in enumerate(model.graph.node):
        node.name = f"node_{i}"
    options = {
        "input_shape": {"x": [2, 4], "ids": [2, 3]},
        "precision": "fp8",
        "fp8_params": "F143,F143,0,0",
    }
    poprt.converter.Converter(fp8_skip_op_names="node_0", **options).convert(model)
    with pytest.raises(
        ValueError, match="fp8_skip_op_names: '/layer1/0/downsample/0/Conv' is not a node"
    ):
        poprt.converter.Converter(
            fp8_skip_op_names="node_0,/layer1/0/downsample/0/Conv", **options
        ).convert(model)


def test_available_memory_proportion_range_is_inclusive(poprt):
    """Issue 29: the docs give [0, 1]; the double refused 0."""
    opts = poprt.compiler.CompilerOptions()
    opts.available_memory_proportion = 0.0
    opts.available_memory_proportion = 1.0
    with pytest.raises(ValueError, match="invalid value 1.5"):
        opts.available_memory_proportion = 1.5


def test_each_emulated_release_offers_only_its_documented_calls(runner, monkeypatch):
    """Issue 52: 1.3 and later: execute_async, no Runner.get_model_inputs (documented only on a
    LightRunner); 1.1 / 1.2: executeAsync and get_model_inputs / get_model_outputs."""
    feeds, outputs = feeds_for(runner)
    runner.execute_async(feeds, outputs).wait()
    assert not hasattr(runner, "executeAsync") and not hasattr(runner, "get_model_inputs")
    monkeypatch.setenv("KIT_POPRT_DOUBLE_VERSION", "1.2.0")
    runner.executeAsync(feeds, outputs).wait()
    assert not hasattr(runner, "execute_async")
    assert [i.shape for i in runner.get_model_inputs()] == [[2, 4], [2, 3]]


def test_no_runner_says_which_ipu_it_attached_the_config_names_it(poprt, tmp_path, monkeypatch):
    """Issue 52: `Runner.device_id` is in no PopRT doc; from 1.3 a RuntimeConfig names the device
    (replica_to_device) that DeviceManager.get_specific_device(id) attached; 1.1 / 1.2 have
    neither."""
    monkeypatch.setenv("KIT_POPRT_DOUBLE_NUM_DEVICES", "2")
    exe = compiled(poprt, tmp_path)
    manager = poprt.runtime.DeviceManager()
    first = manager.get_specific_device(0)
    with pytest.raises(RuntimeError, match="in use"):
        manager.get_specific_device(0)
    config = poprt.runtime.RuntimeConfig()
    config.replica_to_device = poprt.runtime.ReplicaIdToDevice()
    config.replica_to_device[0] = manager.get_specific_device(1)
    runner = poprt.runtime.Runner(exe, config)
    assert not hasattr(runner, "device_id")
    with pytest.raises(AttributeError):
        poprt.runtime.PackRunnerConfig().replica_to_device = poprt.runtime.ReplicaIdToDevice()
    del runner, config, first
    monkeypatch.setenv("KIT_POPRT_DOUBLE_VERSION", "1.2.0")
    assert not hasattr(manager, "get_specific_device") and not hasattr(
        poprt.runtime.RuntimeConfig(), "replica_to_device"
    )


def test_a_graph_that_cannot_go_down_to_convert_version_is_refused(poprt, tmp_path):
    """PopRT converts to `convert_version` (11 by default) first: an opset-17 graph whose Add-14
    ONNX cannot bring down fails there, and the same graph at opset 11 converts (and keeps opset
    11)."""
    shapes = {"x": [2, 4], "ids": [2, 3]}
    at_17 = onnx.load(str(tiny_model(tmp_path / "t17.onnx", opset=17)))
    with pytest.raises(RuntimeError, match=r"opset 11 \(convert_version\).*Add"):
        poprt.converter.Converter(input_shape=shapes).convert(at_17)
    converted = poprt.converter.Converter(input_shape=shapes).convert(
        onnx.load(str(tiny_model(tmp_path / "t11.onnx")))
    )
    assert [o.version for o in converted.opset_import if o.domain in ("", "ai.onnx")] == [11]
    assert (
        poprt.converter.Converter(input_shape=shapes, convert_version=17).convert(at_17) is not None
    )
