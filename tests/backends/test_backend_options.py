"""Each backend's options as a typed record: read from the run's dict, checked, written back
exactly."""

from __future__ import annotations

import pytest

from kit.backends import BACKENDS, BackendConfig, options_for
from kit.backends.options import (
    IpuOptions,
    OnnxRuntimeOptions,
    OpenVinoOptions,
    TensorRtOptions,
    TorchOptions,
)
from kit.errors import InvalidParameter, UnknownValueError

#: every options dict the kit writes today (the search's candidates and the tests' configs), by
#: backend
WRITTEN = {
    "torch": [
        {},
        {"compile": True},
        {"cuda_graph": True},
        {"cuda_graph": True, "clients": 2},
        {"compile": True, "compile_mode": "reduce-overhead"},
        {"compile": True, "compile_mode": "reduce-overhead", "clients": 2},
        {"device_id": 1, "compile": False},
        {"compile_mode": None},
    ],
    "onnxruntime": [
        {"cuda_graph": True},
        {"clients": 2},
        {"quantization": "dynamic"},
        {"graph_optimization": "ORT_ENABLE_EXTENDED"},
        {"device_id": 0},
        {"provider_options": {"CUDAExecutionProvider": {"use_tf32": 0}}},
    ],
    "openvino": [{"hint": "THROUGHPUT"}, {"nncf": "transformer"}, {"hint": "latency"}],
    "tensorrt": [{"clients": 2}, {"device_id": 0}],
    "ipu": [
        {"cache_dir": "/tmp/popef", "pack_check": False},
        {"bytemlperf_settings": False},
        {"compiler_options": {"batches_per_step": 4}, "converter_options": {"used_passes": []}},
    ],
}


@pytest.mark.parametrize("backend,options", [(b, o) for b, os in WRITTEN.items() for o in os])
def test_the_dict_written_today_comes_back_exactly(backend, options):
    record = options_for(backend, options)
    assert record.to_dict() == options
    assert list(record.to_dict()) == list(options)  # the order given, as the JSON holds it


def test_each_backend_names_its_record():
    kinds = {
        name: BACKENDS.get(name).options_type
        for name in ("onnxruntime", "torch", "openvino", "tensorrt", "ipu")
    }
    assert kinds == {
        "onnxruntime": OnnxRuntimeOptions,
        "torch": TorchOptions,
        "openvino": OpenVinoOptions,
        "tensorrt": TensorRtOptions,
        "ipu": IpuOptions,
    }


def test_an_unknown_key_names_itself_and_the_known_ones():
    with pytest.raises(
        UnknownValueError, match=r"unknown torch option 'cuda_grap'; known: clients, compile"
    ):
        options_for("torch", {"cuda_grap": True})
    with pytest.raises(UnknownValueError, match="unknown openvino option 'compile'"):
        options_for("openvino", {"compile": True})


@pytest.mark.parametrize(
    "backend,options,name",
    [
        ("torch", {"compile": "yes"}, "compile"),
        ("torch", {"clients": 0}, "clients"),
        ("torch", {"clients": True}, "clients"),
        ("torch", {"cuda_graph": True, "compile": True}, "cuda_graph"),
        ("onnxruntime", {"device_id": -1}, "device_id"),
        ("onnxruntime", {"graph_optimization": "ORT_ENABLE_EVERYTHING"}, "graph_optimization"),
        ("onnxruntime", {"quantization": "static"}, "quantization"),
        ("openvino", {"hint": "FASTEST"}, "hint"),
        ("openvino", {"nncf": "mixed"}, "nncf"),
        ("ipu", {"pack_check": "no"}, "pack_check"),
        ("ipu", {"compiler_options": [1]}, "compiler_options"),
    ],
)
def test_a_bad_value_names_the_option_and_what_is_allowed(backend, options, name):
    with pytest.raises(InvalidParameter, match=f"invalid {name}="):
        options_for(backend, options)


def test_options_read_as_attributes_with_the_backends_defaults():
    assert OnnxRuntimeOptions.from_dict({}).graph_level == "ORT_ENABLE_ALL"
    assert OpenVinoOptions.from_dict({"hint": "throughput"}).hint_mode == "THROUGHPUT"
    assert OpenVinoOptions.from_dict({}).nncf_preset == "default"
    assert IpuOptions.from_dict({}).published_settings and IpuOptions.from_dict({}).check_packing
    assert not IpuOptions.from_dict({"pack_check": False}).check_packing
    assert TorchOptions.from_dict({"device_id": 2}).ordinal == 2 and TorchOptions().ordinal == 0


def test_a_backend_config_keeps_the_plain_dict_a_result_records():
    config = BackendConfig("fp16", "cpu", options=TorchOptions.from_dict({"compile": True}))
    assert config.options == {"compile": True} and config.to_dict()["options"] == {"compile": True}
    assert config.options_as(TorchOptions).compile is True
    assert (
        BackendConfig(options={"device_id": 1}).device_id == 1 and BackendConfig().device_id is None
    )


def test_a_study_config_checks_its_backends_options():
    from kit.studies.model_benchmark import Config

    with pytest.raises(UnknownValueError, match="unknown onnxruntime option 'compile'"):
        Config(model="resnet50-torch-fp32", backend="onnxruntime", options={"compile": True})
