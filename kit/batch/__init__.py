"""The `make reproduce` batch: jobs, their state, executors (this machine or a Dask cluster)."""

from kit.batch.jobs import Job, JobRecord
from kit.batch.runner import run_jobs
from kit.batch.state import STATE_FILE

__all__ = ["STATE_FILE", "Job", "JobRecord", "run_jobs"]
