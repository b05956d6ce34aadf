"""Child process of the batch: execute one notebook with papermill, then render it to HTML.

`python -m kit.batch.worker SPEC_JSON`. The HTML is rendered even when a cell fails, so the
report shows the error. Exit status: 0 ran, 1 a cell failed, 3 the kernel died (the last line
then says "killed (likely out of memory: peak X GB)"). If the batch process that started it
disappears, it stops its kernel and exits instead of running on as an orphan.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import threading
import time
from pathlib import Path

from kit.batch.proctree import kill_tree, tree
from kit.batch.render import notebook_to_html
from kit.hardware.source import JOB_ENV
from kit.measure.memory import Peak, child_peak, oom_message

EXIT_FAILED = 1
EXIT_KILLED = 3

# nbformat's jsonschema probes the optional rfc3987_syntax package, whose import compiles a lark
# grammar: 1.4 s of every job on a 2-core machine. Notebook validation checks no IRI formats.
sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]  # None: "not installed"


def children_peak() -> Peak:
    """Peak resident memory of the largest finished child (the kernel)."""
    kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return child_peak(kb * 1024 if sys.platform != "darwin" else kb)


def watch_parent(interval_s: float = 1.0) -> None:
    """Stop this process and its kernel once the batch that started it is gone."""
    parent = os.getppid()

    def poll() -> None:
        while os.getppid() == parent:
            time.sleep(interval_s)

        for child in tree(os.getpid())[1:]:
            kill_tree(child.pid, grace_s=1.0)
        os._exit(EXIT_KILLED)

    threading.Thread(target=poll, name="watch-parent", daemon=True).start()


def main(spec_json: str) -> int:
    import papermill as pm
    from nbclient.exceptions import DeadKernelError

    spec = json.loads(spec_json)
    watch_parent()
    if spec.get("job"):  # the kernel inherits it: capture() records the job in the result
        os.environ[JOB_ENV] = json.dumps(spec["job"])
    code = 0
    try:
        pm.execute_notebook(
            spec["input"],
            spec["output"],
            parameters=spec["parameters"],
            kernel_name=spec["kernel"],
            cwd=spec["cwd"],
            progress_bar=False,
            log_output=False,
        )
    except pm.PapermillExecutionError as exc:
        print(f"{exc.ename}: {exc.evalue}".splitlines()[0][:300])
        code = EXIT_FAILED
    except DeadKernelError:
        print(oom_message("killed: the notebook's kernel died", children_peak()))
        code = EXIT_KILLED
    if Path(spec["output"]).exists():
        notebook_to_html(Path(spec["output"]), Path(spec["html"]))
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
