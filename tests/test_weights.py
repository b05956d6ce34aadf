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
    (tmp_path / "model.safetensors").write_bytes(b"")
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
    assert cache_key(entry, info, False, 17, tmp_path) == cache_key(entry, info, False, 17, tmp_path)
