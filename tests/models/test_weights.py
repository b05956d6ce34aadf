import numpy as np
import pytest

from kit.errors import InvalidParameter, MissingResource
from kit.models.weights import HUB_MARKER, fetch_weights, resolve_weights


def test_random_weights_are_labelled():
    info, path = resolve_weights("bert-torch-fp32", "random", seed=3)
    assert path is None and info.is_random and "seed 3" in info.label
    assert "not meaningful" in info.label


def test_local_directory_needs_a_weights_file(tmp_path):
    with pytest.raises(MissingResource, match="fetch-weights bert-torch-fp32"):
        resolve_weights("bert-torch-fp32", str(tmp_path))
    from safetensors.numpy import save_file

    save_file({"w": np.zeros((2, 3), np.float32)}, str(tmp_path / "model.safetensors"))
    info, path = resolve_weights("bert-torch-fp32", str(tmp_path))
    assert path == tmp_path and info.source == "local"
    (tmp_path / HUB_MARKER).write_text("csarron/bert-base-uncased-squad-v1\n")
    info, _ = resolve_weights("bert-torch-fp32", str(tmp_path))
    assert info.source == "hub" and "csarron" in info.detail


def test_bad_weights_value():
    with pytest.raises(InvalidParameter, match="'random', 'local'"):
        resolve_weights("bert-torch-fp32", "pretrained")


def test_fetch_fails_clearly_without_internet(tmp_path, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(MissingResource, match="needs internet access"):
        fetch_weights("bert-torch-fp32", "csarron/bert-base-uncased-squad-v1", tmp_path / "w")


def test_fetch_without_public_checkpoint(tmp_path):
    with pytest.raises(MissingResource, match="no public checkpoint"):
        fetch_weights("widedeep-tf-fp32", None, tmp_path)


def test_local_torch_weights_load_and_mismatch_is_named(tmp_path):
    import torch

    from kit.errors import CorruptModel
    from kit.models.zoo import build_resnet50

    source = build_resnet50(small=True, seed=1)
    state = {k: v for k, v in source.state_dict().items() if not k.endswith("num_batches_tracked")}
    torch.save(state, tmp_path / "model.pt")
    loaded = build_resnet50(small=True, weights_dir=tmp_path, seed=2)
    assert torch.equal(loaded.fc.weight, source.fc.weight)
    torch.save({"fc.weight": state["fc.weight"]}, tmp_path / "model.pt")
    with pytest.raises(CorruptModel, match="missing"):
        build_resnet50(small=True, weights_dir=tmp_path)


def test_replacing_local_weights_changes_the_export_cache_key(tmp_path):
    import os

    from kit.models import get_entry
    from kit.models.export import cache_key
    from kit.models.spec import WeightsInfo

    entry = get_entry("resnet50-torch-fp32")
    info = WeightsInfo("local", str(tmp_path))
    (tmp_path / "model.pt").write_bytes(b"first")
    first = cache_key(entry, info, False, 17, tmp_path)
    (tmp_path / "model.pt").write_bytes(b"second, longer")
    os.utime(tmp_path / "model.pt", ns=(1, 1))
    assert cache_key(entry, info, False, 17, tmp_path) != first
    assert cache_key(entry, info, False, 17, tmp_path) == cache_key(
        entry, info, False, 17, tmp_path
    )


def _safetensors(path, tensors=None):
    from safetensors.numpy import save_file

    save_file(tensors or {"w": np.ones((4, 4), np.float32)}, str(path))
    return path


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda b: b"", "empty"),
        (lambda b: b[:5], "shorter than a safetensors header"),
        (lambda b: (10**9).to_bytes(8, "little") + b[8:], "header length 1000000000"),
        (lambda b: b[:8] + b"\xff" * (len(b) - 8), "not JSON"),
        (lambda b: b[:-10], "truncated file"),
    ],
)
def test_damaged_safetensors_is_named(tmp_path, damage, message):
    from kit.errors import CorruptModel

    good = _safetensors(tmp_path / "model.safetensors").read_bytes()
    (tmp_path / "model.safetensors").write_bytes(damage(good))
    with pytest.raises(CorruptModel, match=message) as err:
        resolve_weights("bert-torch-fp32", str(tmp_path))
    assert str(tmp_path / "model.safetensors") in str(err.value)


def test_safetensors_entry_whose_size_disagrees_with_its_shape(tmp_path):
    import json
    import struct

    from kit.errors import CorruptModel
    from kit.models.weights import check_safetensors

    header = json.dumps({"w": {"dtype": "F32", "shape": [4, 4], "data_offsets": [0, 32]}}).encode()
    path = tmp_path / "model.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 32)
    with pytest.raises(CorruptModel, match=r"'w' F32\[4, 4\] needs 64 bytes, the file gives it 32"):
        check_safetensors(path)


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("model.pt", b"PK\x03\x04 cut short", "neither a zip archive|damaged archive"),
        ("model.pt", b"hello, not a checkpoint", "neither a zip archive"),
        ("model.weights.h5", b"not hdf5 at all", "no HDF5 signature"),
    ],
)
def test_damaged_pt_and_h5_are_named(tmp_path, name, content, message):
    from kit.errors import CorruptModel

    (tmp_path / name).write_bytes(content)
    with pytest.raises(CorruptModel, match=message) as err:
        resolve_weights("resnet50-torch-fp32", str(tmp_path))
    assert str(tmp_path / name) in str(err.value)


def test_truncated_torch_checkpoint_is_named_when_loaded(tmp_path):
    import torch

    from kit.errors import CorruptModel
    from kit.models.weights import load_torch_state

    torch.save({"w": torch.ones(1000)}, tmp_path / "model.pt")
    data = (tmp_path / "model.pt").read_bytes()
    (tmp_path / "model.pt").write_bytes(data[: len(data) // 2])
    with pytest.raises(CorruptModel, match="model.pt"):
        load_torch_state(tmp_path)


def test_wrongly_shaped_weights_name_the_file_tensor_and_shapes(tmp_path):
    import torch

    from kit.errors import CorruptModel
    from kit.models.zoo import build_resnet50

    state = {k: v for k, v in build_resnet50(small=True).state_dict().items()}
    state["fc.weight"] = torch.zeros(3, 7)
    torch.save(state, tmp_path / "model.pt")
    with pytest.raises(
        CorruptModel, match=r"model.pt does not fit ResNet: wrong shape \['fc.weight \[3, 7\]"
    ):
        build_resnet50(small=True, weights_dir=tmp_path)
    from safetensors.torch import save_file

    (tmp_path / "model.pt").unlink()
    save_file({k: v.contiguous() for k, v in state.items()}, str(tmp_path / "model.safetensors"))
    with pytest.raises(CorruptModel, match="model.safetensors does not fit"):
        build_resnet50(small=True, weights_dir=tmp_path)


@pytest.mark.parametrize("from_hub", [False, True])
def test_the_torch_backend_runs_the_weights_the_export_ran(tmp_path, from_hub):
    """A directory `kit fetch-weights` filled (its HUB_ID marker makes the weights "hub", their
    detail "<id> (in <dir>)") is the directory the torch backend builds from, as a local one."""
    import torch

    from kit.backends import BackendConfig, get_backend, torch_backend
    from kit.models import export_model
    from kit.models.zoo import build_resnet50

    weights = tmp_path / "weights"
    weights.mkdir()
    source = build_resnet50(small=True, seed=7)
    torch.save(
        {k: v for k, v in source.state_dict().items() if not k.endswith("num_batches_tracked")},
        weights / "model.pt",
    )
    if from_hub:
        (weights / HUB_MARKER).write_text("someone/resnet50\n")
    model = export_model(
        "resnet50-torch-fp32", small=True, weights=str(weights), cache=tmp_path / "cache"
    )
    assert (
        model.weights.source == ("hub" if from_hub else "local")
        and model.weights.directory == weights
    )
    torch_backend.built_module.cache_clear()
    session = get_backend("torch").load(model, BackendConfig(), 1)
    assert torch.equal(session.module.fc.weight, source.fc.weight)
    torch_backend.built_module.cache_clear()
