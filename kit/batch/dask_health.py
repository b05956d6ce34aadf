"""What a Dask cluster can run, asked before submitting and watched while waiting.

Before submitting: which resources the workers offer, and which workers cannot import the kit
(they would die unpickling their first task, and the job would wait for ever). While waiting:
a job whose hardware no connected worker has offered for `lost_after_s` (every such worker died
or left, nannies included) is given up with the reason, instead of being waited on for ever.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import time

PROBE_MODULE = "kit.batch.dask_executor"  # what a worker must import to run a task


def offered(workers: dict) -> dict[str, set[str]]:
    """{resource: worker addresses offering at least one unit} from scheduler_info()["workers"]."""
    found: dict[str, set[str]] = {}
    for address, w in workers.items():
        for name, amount in (w.get("resources") or {}).items():
            if amount >= 1:
                found.setdefault(name, set()).add(address)
    return found


def workers_without_kit(client) -> dict[str, str]:
    """Workers that cannot import the kit, each with a one-line message. Asked with a
    standard-library function, which any worker can unpickle."""
    answers = client.run(importlib.util.find_spec, PROBE_MODULE, on_error="return")
    return {
        address: (
            f"worker {address} cannot import the kit ({_why(answer)}); run its `dask worker` "
            f"from a checkout of this repository set up with `make install` (docs/cluster.md)"
        )
        for address, answer in answers.items()
        if not isinstance(answer, importlib.machinery.ModuleSpec)
    }


def cannot_run(
    resource: str | None, offers: dict[str, set[str]], workers: set[str], no_kit: dict[str, str]
) -> str | None:
    """Why no worker of the cluster can run a job needing `resource` (None: any worker), or None."""
    able = offers.get(resource, set()) if resource else workers
    if resource and not able:
        return (
            f"no worker of this cluster offers {resource!r} (workers offer: "
            f"{', '.join(sorted(offers)) or 'nothing'}); start one with "
            f"`dask worker ... --resources {resource}=1`"
        )
    if able and able <= set(no_kit):
        return "; ".join(no_kit[w] for w in sorted(able))
    return None


class Liveness:
    """Remembers since when each resource has had no worker; says which waits to give up."""

    def __init__(self, client, lost_after_s: float, every_s: float = 1.0):
        self.client, self.lost_after_s, self.every_s = client, lost_after_s, every_s
        self._alone: dict[str | None, float] = {}  # resource -> since when no worker offers it
        self._checked = 0.0

    def given_up(self, resources: list[str | None]) -> dict[str | None, str]:
        """{resource: why its jobs are given up} among `resources` (None: a job any worker runs);
        asks the scheduler at most every `every_s`."""
        now = time.monotonic()
        if now - self._checked < self.every_s:
            return {}
        self._checked = now
        try:
            workers = self.client.scheduler_info()["workers"]
            offers, lost = offered(workers), None
        except Exception as exc:  # noqa: BLE001 - a lost scheduler: every waiting job is given up
            workers, offers = {}, {}
            lost = (
                f"lost the Dask scheduler at {self.client.scheduler.address} ({type(exc).__name__})"
            )
        out = {}
        for resource in set(resources):
            if (resource in offers) if resource else bool(workers):
                self._alone.pop(resource, None)
            elif now - self._alone.setdefault(resource, now) >= self.lost_after_s:
                out[resource] = lost or self._message(resource)
        return out

    def _message(self, resource: str | None) -> str:
        what = f"worker offering {resource!r}" if resource else "worker"
        return (
            f"no {what} was connected to the Dask scheduler at {self.client.scheduler.address} for "
            f"{self.lost_after_s:.0f} s (its workers died or left; a worker that cannot import the "
            f"kit dies on its first task: see the worker's log); start one with `dask worker` from "
            f"a checkout set up with `make install` (docs/cluster.md)"
        )


def _why(answer: object) -> str:
    return (
        f"{type(answer).__name__}: {answer}"
        if isinstance(answer, BaseException)
        else f"no module {PROBE_MODULE}"
    )
