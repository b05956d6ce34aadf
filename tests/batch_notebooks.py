"""Tiny notebooks for the batch tests: they write a results JSON and need no model."""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_notebook

# Writes a results JSON the batch reads as ok, with where it ran.
WRITE_RESULTS = """
import json, os, socket
from pathlib import Path
_out = Path(results_path) if results_path else Path("interactive.json")
_out.parent.mkdir(parents=True, exist_ok=True)
_out.write_text(json.dumps({"schema_version": 1, "kind": "summary", "name": "stand-in", \
"parameters": {}, "environment": {}, "status": "ok", "errors": [], "host": socket.gethostname(),
                            "pid": os.getpid(), "device": device,
                            "omp_threads": os.environ.get("OMP_NUM_THREADS")}))
"""


def make_notebook(path: Path, source: str, parameters: str = "") -> Path:
    """A notebook with a parameters cell (results_path, device, and `parameters`) and one cell."""
    nb = new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "ipu-repro",
        "display_name": "ipu-repro",
        "language": "python",
    }
    params = new_code_cell("results_path = ''\ndevice = 'cpu'\n" + parameters)
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, new_code_cell(source)]
    nbformat.write(nb, str(path))
    return path


def make_ok_notebook(path: Path, parameters: str = "", before: str = "") -> Path:
    """Runs `before`, then writes an ok results JSON."""
    return make_notebook(path, before + "\n" + WRITE_RESULTS, parameters)
