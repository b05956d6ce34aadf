"""The papermill batch end to end on real notebooks (small models), with failures and resume."""

import json
import shutil
import time

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from kit.batch import Job
from kit.batch.runner import run_jobs
from kit.publish.site import write_index
from tests.batch_notebooks import make_ok_notebook
from tests.conftest import ROOT
from tests.ipu_helpers import double_env

SMALL = {
    "model": "resnet50-torch-fp32",
    "small": True,
    "batch_sizes": [1],
    "warmup": 1,
    "min_duration_s": 0.05,
    "min_count": 3,
    "target_ci": 0.0,
}


def make_notebook(path, source):
    nb = new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "ipu-repro",
        "display_name": "ipu-repro",
        "language": "python",
    }
    params = new_code_cell("results_path = ''")
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, new_code_cell(source)]
    nbformat.write(nb, str(path))


@pytest.fixture
def ipu_double(monkeypatch):
    """The notebooks' kernels see the poprt test double as PopRT."""
    for key, value in double_env(True).items():
        if key in ("PYTHONPATH", "KIT_IPU_PYTHON", "KIT_STEP_PEAKS"):
            monkeypatch.setenv(key, value)


@pytest.fixture
def notebooks(tmp_path, monkeypatch):
    folder = tmp_path / "notebooks"
    shutil.copytree(ROOT / "notebooks", folder)
    make_notebook(folder / "broken.ipynb", "1 / 0")
    make_notebook(folder / "slow.ipynb", "import time; time.sleep(60)")
    monkeypatch.setenv("KIT_NOTEBOOKS", str(folder))
    return folder


def jobs():
    return [
        # the headline's batch
        Job("resnet50_small", "model_benchmark.ipynb", {**SMALL, "batch_sizes": [32]}, 300),
        Job(
            "ipu_emulated",
            "model_benchmark.ipynb",
            {
                **SMALL,
                "batch_sizes": [32],
                "backend": "ipu",
                "device": "ipu",
                "precision": "fp16",
                "accuracy": False,
            },
            300,
        ),
        Job("summary", "summary.ipynb", {}, 300, after_all=True),
    ]


def failing_jobs():
    return [
        Job("bad_model", "model_benchmark.ipynb", {**SMALL, "model": "nosuchnet"}, 300),
        Job("bad_batch", "model_benchmark.ipynb", {**SMALL, "batch_sizes": [-3]}, 300),
        Job("broken", "broken.ipynb", {}, 300),
        Job("slow", "slow.ipynb", {}, 3),
        Job("after", "tiny.ipynb", {}, 300),
    ]


def test_batch_runs_the_notebooks_labels_the_double_and_summarises(outputs, notebooks, ipu_double):
    first = {r.name: r for r in run_jobs(jobs(), out=outputs)}
    assert first["resnet50_small"].status == "ok"
    assert first["summary"].status == "ok"
    assert first["ipu_emulated"].status == "ok", first["ipu_emulated"].message
    assert "not run on an IPU" in first["ipu_emulated"].hardware
    assert "not run on an IPU" in (outputs / first["ipu_emulated"].html).read_text()

    html = (outputs / first["resnet50_small"].html).read_text()
    assert "run_model_benchmark(" not in html  # no input cells
    assert "<table" in html and "random initialisation" in html
    card = json.loads((outputs / first["summary"].results).read_text())["tables"]["scorecard"]
    measured = [
        c
        for c in card
        if c["model"] == "resnet50-torch-fp32"
        and c["figure"] == "QPS"
        and c["study"] == "bytemlperf_c600"
        and c["precision"] == "FP16"
    ]
    assert measured and all(c["verdict"] == "not comparable" for c in measured)


def test_each_failure_is_reported_and_the_batch_goes_on(outputs, notebooks):
    make_ok_notebook(notebooks / "tiny.ipynb")
    first = {r.name: r for r in run_jobs(failing_jobs(), out=outputs)}
    assert first["bad_model"].status == "error"
    assert "unknown model 'nosuchnet'; known:" in first["bad_model"].message
    assert "invalid batch_size=-3" in first["bad_batch"].message
    assert first["broken"].status == "failed" and "ZeroDivisionError" in first["broken"].message
    assert first["slow"].status == "timeout"
    assert first["after"].status == "ok"  # one failing notebook never stops a batch
    assert "unknown model" in (outputs / first["bad_model"].html).read_text()
    index = write_index([r.to_dict() for r in first.values()], outputs)
    page = index.read_text()
    assert all(name in page for name in first) and "timeout" in page


def tiny_jobs():
    """The resume rules on notebooks that need no model: one ok, one failing, a summary after
    all."""
    return [
        Job("ok", "tiny.ipynb", {}),
        Job("broken", "broken.ipynb", {}),
        Job("summary", "tiny.ipynb", {}, after_all=True),
    ]


def test_resume_reuses_ok_jobs_reruns_failures_and_summaries_whose_inputs_changed(
    outputs, notebooks
):
    make_ok_notebook(notebooks / "tiny.ipynb")
    started = time.perf_counter()
    first = {r.name: r for r in run_jobs(tiny_jobs(), out=outputs)}
    first_s = time.perf_counter() - started
    assert [first[n].status for n in ("ok", "broken", "summary")] == ["ok", "failed", "ok"]

    second = {r.name: r for r in run_jobs(tiny_jobs(), out=outputs)}
    assert second["ok"].reused
    assert not second["broken"].reused  # failures are always re-run
    assert not second["summary"].reused  # its inputs (the results it reads) changed
    started = time.perf_counter()
    third = run_jobs([tiny_jobs()[0], tiny_jobs()[-1]], out=outputs)
    fourth = run_jobs([tiny_jobs()[0], tiny_jobs()[-1]], out=outputs)
    assert not third[1].reused and all(r.reused for r in fourth)
    assert len(list((outputs / "runs").iterdir())) == 4  # every run kept
    assert time.perf_counter() - started < first_s

    forced = run_jobs(tiny_jobs()[:1], out=outputs, force=True)
    assert not forced[0].reused and forced[0].run_id != first["ok"].run_id
