"""Fingerprints: a job is reused only when everything its output depends on is unchanged."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from kit.batch.jobs import Job
from kit.paths import imported_reports_dir, project_notebook, project_root

#: parameters that say how one run goes, not what its output is: where it writes (per run), and
#: FORCE=1's search again (what it measures is the same row, so a plain run after it reuses it)
HOW_IT_RUNS = ("results_path", "search_force")


def kit_digest() -> str:
    """Hash of the kit's code and published data: two hosts with equal digests run the same kit."""
    root = project_root()
    h = hashlib.sha256()
    for path in sorted((root / "kit").rglob("*.py")) + sorted(
        (root / "data" / "published").glob("*.csv")
    ):
        h.update(path.relative_to(root).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def inputs_fingerprint(job: Job, extra: str = "", *, digest: str | None = None) -> str:
    """Hash of everything a notebook's output depends on: notebook, parameters, kit, data."""
    h = hashlib.sha256()
    # a missing one: named, before anything runs
    h.update(project_notebook(job.notebook).read_bytes())
    params = {k: v for k, v in job.parameters.items() if k not in HOW_IT_RUNS}
    h.update(json.dumps(params, sort_keys=True).encode())
    h.update(extra.encode())
    h.update((digest or kit_digest()).encode())
    return h.hexdigest()[:16]


def result_hashes(job: Job, out: Path) -> str:
    """Hashes of the files an after_all job reads (the results it is given and the ByteMLPerf
    reports `kit import-bytemlperf` brought in): it re-runs when any of them changes."""
    files = [out / f for f in job.parameters.get("result_files", [])]
    imported = imported_reports_dir(out)
    if job.after_all and imported.is_dir():
        files += sorted(imported.rglob("*.json"))
    return "".join(hashlib.sha1(f.read_bytes()).hexdigest() for f in files if f.exists())
