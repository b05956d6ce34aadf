"""The `make reproduce` batch: jobs, their state, executors (this machine or a Dask cluster).

Floor 8 of kit/ (docs/architecture.md): imports kit.search (the profiles' plans and decision keys)
and the floors below it; the studies run inside the notebooks, so it never imports kit.studies.
"""

from kit.batch.jobs import Job, JobRecord
from kit.batch.runner import run_jobs
from kit.batch.state import STATE_FILE

__all__ = ["STATE_FILE", "Job", "JobRecord", "run_jobs"]
