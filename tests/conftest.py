import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"


@pytest.fixture
def outputs(tmp_path, monkeypatch):
    """A private outputs/ folder (results, cache) for one test."""
    out = tmp_path / "outputs"
    out.mkdir()
    monkeypatch.setenv("KIT_OUTPUTS", str(out))
    monkeypatch.setenv("KIT_CACHE", str(ROOT / "outputs" / "cache"))  # exports are shared, keyed
    return out


@pytest.fixture(scope="session")
def small(tmp_path_factory):
    """A small ResNet-50 export with its own cache, so conversions start from nothing."""
    from kit.models import export_model

    cache = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KIT_CACHE", str(cache))
        yield export_model("resnet50-torch-fp32", small=True, cache=cache / "models")


def shared_or_skip(*parts: str) -> Path:
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} not present (the shared reference folder sits beside the checkout)")
    return path


os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.modules.setdefault("rfc3987_syntax", None)  # as kit.batch.worker does: 1.4 s of grammar compiling


@pytest.fixture
def fake_backend():
    """The 'fake' backend registered for one test (see tests/fake_backend.py)."""
    from kit.backends import BACKENDS
    from tests.fake_backend import FakeBackend

    FakeBackend.sessions, FakeBackend.log = [], []
    BACKENDS.register("fake", FakeBackend)
    try:
        yield FakeBackend
    finally:
        BACKENDS.unregister("fake")


# `--doctest-modules` (pyproject's addopts) is for kit/'s docstrings: tests/ helper modules and the
# PopRT double (a fake `poprt` and `gcipuinfo` that must not be imported unasked) are not collected.
collect_ignore = ["poprt_double"]
collect_ignore_glob = ["[!t]*.py"]
