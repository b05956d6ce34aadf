"""Child process of the batch: execute one notebook with papermill, then render it to HTML.

The HTML is rendered even when a cell fails, so the report shows the error.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(spec_json: str) -> int:
    import papermill as pm

    from kit.render import notebook_to_html

    spec = json.loads(spec_json)
    code = 0
    try:
        pm.execute_notebook(spec["input"], spec["output"], parameters=spec["parameters"],
                            kernel_name=spec["kernel"], cwd=spec["cwd"], progress_bar=False,
                            log_output=False)
    except pm.PapermillExecutionError as exc:
        print(f"{exc.ename}: {exc.evalue}".splitlines()[0][:300])
        code = 1
    if Path(spec["output"]).exists():
        notebook_to_html(Path(spec["output"]), Path(spec["html"]))
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
