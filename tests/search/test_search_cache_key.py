"""kit.search.cache: a search decision is keyed by the GPU build of ONNX Runtime and TensorRT too,
so that a new onnxruntime-gpu or TensorRT searches the row again."""

from __future__ import annotations

import importlib.metadata

from kit.search import cache


def installed(monkeypatch, versions: dict[str, str]) -> None:
    def version(name):
        if name not in versions:
            raise importlib.metadata.PackageNotFoundError(name)
        return versions[name]

    monkeypatch.setattr(importlib.metadata, "version", version)  # what every version lookup reads


def test_gpu_build_and_tensorrt_versions_are_in_the_key(monkeypatch):
    gpu_host = {"torch": "2.13.0", "onnxruntime-gpu": "1.31.1", "tensorrt-cu13-libs": "10.16.1.11"}
    installed(monkeypatch, gpu_host)
    versions = cache.software_versions()
    assert (
        versions["onnxruntime-gpu"] == "1.31.1" and versions["tensorrt-cu13-libs"] == "10.16.1.11"
    )
    key = cache.key_hash(cache.decision_key("resnet50-torch-fp32", "FP8", 32, "cpu"))
    installed(monkeypatch, {**gpu_host, "tensorrt-cu13-libs": "10.15.1.29"})
    assert cache.key_hash(cache.decision_key("resnet50-torch-fp32", "FP8", 32, "cpu")) != key
    installed(monkeypatch, {**gpu_host, "onnxruntime-gpu": "1.32.0"})
    assert cache.key_hash(cache.decision_key("resnet50-torch-fp32", "FP8", 32, "cpu")) != key


def test_a_cpu_install_key_names_no_gpu_software(monkeypatch):
    installed(monkeypatch, {"torch": "2.13.0", "onnxruntime": "1.31.1"})
    assert set(cache.software_versions()) == {"search", "torch", "onnxruntime"}
