"""The `make reproduce` batch: jobs, their state, executors (this machine or a Dask cluster).

Floor 8 of kit/ (docs/architecture.md): imports kit.search (the profiles' plans and decision keys)
and the floors below it. Only what plans, prepares and runs a batch from the studies' configs
(`prepare`, `time_plan`, `runner` and its executors) imports kit.studies; a job, its record and the
state (what publishing reads) never do, so rendering imports no backend. Run a batch with
`kit.batch.runner.run_jobs`.
"""

from kit.batch.jobs import Job, JobRecord
from kit.batch.state import STATE_FILE

__all__ = ["STATE_FILE", "Job", "JobRecord"]
