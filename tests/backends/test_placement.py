"""What runs where, one record: the search's candidates, probes and plan, the mapping's choice and
a study's config name the same `Placement`, and its labels and plans are the ones the kit wrote."""

from __future__ import annotations

from unittest import mock

import pytest

from kit.backends import Placement
from kit.backends.options import OnnxRuntimeOptions, TorchOptions
from kit.errors import UnknownValueError
from kit.search import candidates
from kit.search.decision import Plan
from kit.search.precision_map import PrecisionChoice
from kit.search.probe import Probe
from kit.studies.model_benchmark import Config

#: the labels a GPU search's candidates carried before the options were typed (the cache's and the
#: results' probe labels, and what a quick search's fallbacks name)
GPU_LABELS = [
    "onnxruntime fp32 (cuda)",
    "onnxruntime fp16 (cuda)",
    "onnxruntime fp16 cuda-graph (cuda)",
    "onnxruntime fp16 clients=2 (cuda)",
    "onnxruntime fp16 (tensorrt)",
    "onnxruntime int8 (tensorrt)",
    "tensorrt fp16 (cuda)",
    "tensorrt int8 (cuda)",
    "torch fp32 (cuda)",
    "torch fp16 (cuda)",
    "torch bf16 (cuda)",
    "torch fp16 cuda-graph (cuda)",
    "torch bf16 cuda-graph (cuda)",
    "torch fp16 cuda-graph clients=2 (cuda)",
    "torch fp16 compile=reduce-overhead (cuda)",
    "torch fp16 compile=max-autotune (cuda)",
]
CPU_LABELS = [
    "onnxruntime fp32 (cpu)",
    "onnxruntime fp32 graph=EXTENDED (cpu)",
    "onnxruntime fp16 (cpu)",
    "onnxruntime int8 (cpu)",
    "onnxruntime int8 static-qdq (cpu)",
    "onnxruntime fp32 threads=3 (cpu)",
    "onnxruntime int8 threads=3 (cpu)",
    "openvino fp32 (cpu)",
    "openvino bf16 (cpu)",
    "openvino fp16 (cpu)",
    "openvino int8 (cpu)",
    "openvino int8 nncf=transformer (cpu)",
    "openvino fp32 hint=THROUGHPUT (cpu)",
    "openvino fp16 hint=THROUGHPUT (cpu)",
    "torch fp32 (cpu)",
    "torch fp32 compile (cpu)",
    "torch bf16 (cpu)",
    "torch bf16 compile (cpu)",
    "torch fp16 (cpu)",
    "torch int8 (cpu)",
]


def test_the_candidates_labels_are_the_ones_written_before():
    with mock.patch.object(candidates, "tensorrt_python", lambda: True):
        gpu = candidates.row_candidates("torch", "cuda", providers={"TensorrtExecutionProvider"})
    cpu = candidates.row_candidates(
        "torch",
        "cpu",
        flags={"avx512_bf16", "avx512_fp16", "avx512_vnni"},
        cores=4,
        int8_method="dynamic",
    )
    assert [c.label for c in gpu] == GPU_LABELS
    assert [c.label for c in cpu] == CPU_LABELS
    assert all(c.placement.label == c.label and c.placement.plan() == c.plan() for c in gpu + cpu)


def test_a_placement_reads_the_backends_options_and_writes_the_plan_back():
    p = Placement.of(
        "torch", "fp16", "cuda", {"compile": True, "compile_mode": "reduce-overhead", "clients": 2}
    )
    assert isinstance(p.options, TorchOptions) and p.options.compiles and p.options.clients == 2
    assert p.plan() == {
        "backend": "torch",
        "precision": "fp16",
        "device": "cuda",
        "threads": None,
        "options": {"compile": True, "compile_mode": "reduce-overhead", "clients": 2},
    }
    assert Placement.from_plan(p.plan()) == p
    config = p.backend_config(kind="cuda")
    assert (config.precision, config.device, config.options, config.kind) == (
        "fp16",
        "cuda",
        p.plan()["options"],
        "cuda",
    )
    with pytest.raises(UnknownValueError, match="unknown onnxruntime option 'compile'"):
        Placement.of("onnxruntime", "fp32", "cpu", {"compile": True})


def test_the_search_and_the_study_config_share_the_record():
    """The search's records hold the placement itself and read it back from their flat JSON."""
    options = {"graph_optimization": "ORT_ENABLE_EXTENDED"}
    want = Placement.of("onnxruntime", "fp32", "cpu", options, threads=3)
    candidate = candidates.RowCandidate.of("onnxruntime", "fp32", options=options, threads=3)
    probe = Probe.from_dict({"label": candidate.label, **want.plan(), "native": True, "why": ""})
    plan = Plan.from_dict({**want.plan(), "precision_note": "n"})
    config = Config(
        backend="onnxruntime", precision="fp32", device="cpu", options=options, threads=3
    )
    assert candidate.placement == probe.placement == plan.placement == config.placement() == want
    assert (
        isinstance(want.options, OnnxRuntimeOptions)
        and want.options.graph_level == "ORT_ENABLE_EXTENDED"
    )
    assert probe.backend_config() == config.backend_config() == want.backend_config(kind="cpu")
    assert PrecisionChoice(Placement("onnxruntime", "int8"), "why").placement == Placement(
        "onnxruntime", "int8"
    )


def test_the_search_records_json_stays_flat_in_its_order():
    """The cache and result files hold the five fields flat, in the order the records had them."""
    options = {"graph_optimization": "ORT_ENABLE_EXTENDED"}
    candidate = candidates.RowCandidate.of(
        "onnxruntime", "fp32", options=options, threads=3, why="w"
    )
    assert list(candidate.to_dict()) == [
        "backend",
        "precision",
        "device",
        "options",
        "threads",
        "native",
        "depth",
        "why",
        "fallback_for",
        "full_only_why",
        "label",
    ]
    probe = Probe.from_dict(
        {"label": "x", **candidate.plan(), "native": True, "why": "", "numerics": {"a": 1}}
    )
    flat = probe.to_dict()
    assert list(flat)[:8] == [
        "label",
        "backend",
        "precision",
        "device",
        "options",
        "threads",
        "native",
        "why",
    ]
    assert flat["options"] == options and flat["threads"] == 3 and Probe.from_dict(flat) == probe
    flat["numerics"]["a"] = 2  # a copy: the probe keeps its own
    assert probe.numerics == {"a": 1}
    plan = Plan.from_dict({**candidate.plan(), "precision_note": "n"})
    assert plan.to_dict() == {**candidate.plan(), "precision_note": "n"}
    assert list(plan.to_dict()) == [
        "backend",
        "precision",
        "device",
        "options",
        "threads",
        "precision_note",
    ]
