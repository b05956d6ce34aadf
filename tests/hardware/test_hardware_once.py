"""The hardware kind is settled once (the batch's profile, or the study config from its device) and
travels down: the Dask resource, the backend config and the power sampler read it, nothing
re-derives it from a device string; the per-row search decision is made only by the job."""

from __future__ import annotations

import pytest

from kit.backends.base import BackendConfig
from kit.batch import Job
from kit.batch.jobs import hardware_resource
from kit.batch.profiles import jobs_for
from kit.errors import InvalidParameter
from kit.search import decision_key, key_hash
from kit.studies.model_benchmark import Config


def test_a_tensorrt_job_takes_the_cuda_resource():
    """Bug (issue 26): a 9th kind table in batch/jobs forgot 'tensorrt': with --scheduler on a host
    whose ONNX Runtime loads TensorRT, the FP8 rows' jobs raised and the whole batch aborted."""
    assert hardware_resource(Job("x", "model_benchmark.ipynb", {"device": "tensorrt"})) == "cuda"
    assert (
        hardware_resource(
            Job("x", "model_benchmark.ipynb", {"device": "tensorrt", "hardware": "cuda"})
        )
        == "cuda"
    )
    assert hardware_resource(Job("x", "model_benchmark.ipynb", {"backend": "ipu"})) == "ipu"
    assert hardware_resource(Job("x", "model_benchmark.ipynb", {})) == "cpu"
    assert hardware_resource(Job("x", "summary.ipynb", {"device": "cuda"})) is None


@pytest.mark.parametrize("params, bad", [({"device": "tpu"}, "tpu"), ({"hardware": "gpu"}, "gpu")])
def test_an_unknown_device_or_kind_is_named(params, bad):
    with pytest.raises(InvalidParameter, match=bad):
        hardware_resource(Job("x", "model_benchmark.ipynb", params))


def test_every_timed_job_carries_the_kind_the_batch_resolved():
    jobs = jobs_for("quick", "cpu")
    timed = [j for j in jobs if hardware_resource(j) is not None]
    assert timed and all(j.parameters["hardware"] == "cpu" for j in timed)


def test_the_config_settles_the_kind_once_and_refuses_a_contradiction():
    assert Config(device="tensorrt", precision="int8").hardware == "cuda"
    assert Config().hardware == "cpu"
    assert BackendConfig("fp16", "tensorrt").kind == "cuda"
    with pytest.raises(InvalidParameter, match="'cuda', the kind of device 'tensorrt'"):
        Config(device="tensorrt", precision="int8", hardware="cpu")


def test_planning_does_not_read_search_decisions_the_job_carries_their_key(monkeypatch):
    """The per-row decision is made (or reused) in one place, the job's kit.search.decide; the plan
    only names the decision's key, so other hardware or software makes another job fingerprint."""

    def no_reading(*args, **kwargs):
        raise AssertionError("planning read a search decision")

    monkeypatch.setattr("kit.search.cache.load_decision", no_reading)
    monkeypatch.setattr("kit.search.row.cache.load_decision", no_reading)
    job = next(j for j in jobs_for("quick", "cpu") if j.name == "resnet50-torch-fp32_FP16")
    batch = job.parameters["search_batch"]
    # measured at the published sizes
    assert batch == 4 and job.parameters["batch_sizes"] == [4, 32]
    assert job.parameters["search"] is True
    assert job.parameters["search_key"] == key_hash(
        decision_key("resnet50-torch-fp32", "FP16", batch, "cpu")
    )
    assert all(
        not j.parameters.get("search") for j in jobs_for("quick", "cpu") if j.name == "c2_study"
    )
