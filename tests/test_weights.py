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
