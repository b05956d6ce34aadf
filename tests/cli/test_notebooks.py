"""All five notebooks under papermill, as the batch and JupyterLab run them, on small models.

Each must finish without an error cell, show its tables (and plots where it draws one) and write
its result JSON with status ok.
"""

import json

import nbformat
import papermill as pm
import pytest

from kit.batch.worker import IpcKernelManager
from tests.conftest import ROOT

SMALL_TIMING = {"warmup": 1, "min_duration_s": 0.05, "min_count": 3, "target_ci": 0.0}
CASES = {
    "published_results": ({}, True),
    "model_benchmark": (
        {
            "model": "resnet50-torch-fp32",
            "small": True,
            "batch_sizes": [1, 2],
            "search": True,
            "accuracy": False,
            **SMALL_TIMING,
        },
        True,
    ),
    "c2_study": ({"small": True, "batch_sizes": [2, 4], **SMALL_TIMING}, True),
    "server_scenario": (
        {
            "small": True,
            "policies": [[1, 0.0]],
            "min_duration_s": 0.2,
            "min_query_count": 8,
            "max_duration_s": 2.0,
            "max_probes": 2,
            "fixed_batch_duration_s": 0.05,
        },
        True,
    ),
    "summary": ({}, False),
}


def outputs_of(nb) -> list[dict]:
    return [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]


@pytest.mark.parametrize("name", list(CASES))
def test_notebook_runs_under_papermill(name, outputs, tmp_path):
    params, draws = CASES[name]
    results = tmp_path / f"{name}.json"
    out = tmp_path / f"{name}.ipynb"
    pm.execute_notebook(
        str(ROOT / "notebooks" / f"{name}.ipynb"),
        str(out),
        kernel_name="ipu-repro",
        parameters={**params, "results_path": str(results)},
        cwd=str(ROOT),
        progress_bar=False,
        kernel_manager_class=IpcKernelManager,  # as the batch starts them: no TCP port race
    )
    nb = nbformat.read(str(out), as_version=4)
    shown = outputs_of(nb)
    assert not [o for o in shown if o.get("output_type") == "error"]
    html = [o["data"]["text/html"] for o in shown if "text/html" in o.get("data", {})]
    assert any("<table" in h for h in html), "no table shown"
    if draws:
        assert any("image/png" in o.get("data", {}) for o in shown), "no plot drawn"
    data = json.loads(results.read_text())
    assert data["status"] == "ok", data["errors"]
    assert data["kind"] == name
    if params.get("search"):  # the per-row search ran and its table is in the results
        assert data["tables"]["search"] and data["tables"]["roofline"]


def test_committed_notebooks_are_thin_and_without_outputs():
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        nb = nbformat.read(str(path), as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert all(not c.get("outputs") and c.get("execution_count") is None for c in code), (
            path.name
        )
        assert code[0].metadata.get("tags") == ["parameters"], path.name
        # JupyterLab opens it with the project's kernel
        assert nb.metadata.kernelspec.name == "ipu-repro", path.name
        for cell in code[1:]:  # logic lives in kit/: a cell is a few calls
            assert len([ln for ln in cell.source.splitlines() if ln.strip()]) <= 5, (
                path.name,
                cell.source,
            )
