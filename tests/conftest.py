import importlib
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"


@pytest.fixture(scope="session", autouse=True)
def session_reference_cache(tmp_path_factory):
    """The fp32 reference's disk entries (kit.backends.reference_outputs) of the session's shared
    fixtures, never those of an earlier test run."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KIT_REFERENCE_CACHE", str(tmp_path_factory.mktemp("reference-outputs")))
        yield


@pytest.fixture(autouse=True)
def reference_cache(tmp_path, monkeypatch):
    """Each test's own: whether a reference is computed must not depend on which tests ran
    before it on the same worker."""
    from kit.backends import reference_outputs

    folder = tmp_path / "reference-outputs"
    monkeypatch.setenv("KIT_REFERENCE_CACHE", str(folder))
    reference_outputs.forget()  # nor on what an earlier test left in this worker's memory
    yield folder
    reference_outputs.forget()


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


@pytest.fixture(scope="session")
def published_site(tmp_path_factory):
    """A real tiny batch (a small ResNet-50 at the published batch sizes 4 and 32, then the summary)
    and its index: (outputs folder, index.html, {job name: record}). Shared by the page checks
    (tests/publish/test_pages.py) and the browser checks (tests/project/test_browser.py)."""
    from kit.batch import Job
    from kit.batch.runner import run_jobs
    from kit.publish.site import write_index

    out = tmp_path_factory.mktemp("site") / "outputs"
    params = {
        "model": "resnet50-torch-fp32",
        "small": True,
        "batch_sizes": [4, 32],
        "warmup": 1,
        "min_duration_s": 0.05,
        "min_count": 3,
        "target_ci": 0.0,
    }
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KIT_OUTPUTS", str(out))
        mp.setenv("KIT_CACHE", str(ROOT / "outputs" / "cache"))  # exports are shared, keyed
        records = run_jobs(
            [
                Job("resnet50_small", "model_benchmark.ipynb", params, 300),
                Job("summary", "summary.ipynb", {}, 300, after_all=True),
            ],
            out=out,
        )
        index = write_index([r.to_dict() for r in records], out, profile="test", hardware="cpu")
    return out, index, {r.name: r for r in records}


def shared_or_skip(*parts: str) -> Path:
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} not present (the shared reference folder sits beside the checkout)")
    return path


os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# as kit.batch.worker does: 1.4 s of grammar compiling
sys.modules.setdefault("rfc3987_syntax", None)


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
# (A glob here would match the test folders' files too: fnmatch's * crosses '/'.)
collect_ignore = [
    "poprt_double",
    *(p.name for p in Path(__file__).parent.glob("*.py") if not p.name.startswith("test_")),
]


@pytest.fixture
def poprt(monkeypatch):
    """The PopRT test double imported fresh (fast settings), and forgotten afterwards."""
    from tests.ipu_helpers import DOUBLE, FAST_DOUBLE  # onnx at its top: only where asked for

    for key, value in FAST_DOUBLE.items():
        monkeypatch.setenv(key, value)
    monkeypatch.syspath_prepend(str(DOUBLE))
    for name in [m for m in sys.modules if m == "poprt" or m.startswith("poprt.")]:
        monkeypatch.delitem(sys.modules, name)
    yield importlib.import_module("poprt")
    for name in [m for m in sys.modules if m == "poprt" or m.startswith("poprt.")]:
        del sys.modules[name]
