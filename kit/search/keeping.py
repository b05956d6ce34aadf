"""The search's leader kept open for the row's own measurement where loading it again means
compiling it again.

A torch.compile'd module has no form on disk: the measurement loading the chosen candidate after
the search compiled it for its probe compiles it a second time (with inductor's caches warm, about a
fifth of the first: 7 s of 36 s for resnet50 on a 2-core EPYC). OpenVINO, ONNX Runtime and TensorRT
reload theirs from their own caches, so they are not kept.

One session is kept at a time, besides the candidate being probed: a measured torch.compile
candidate that was ahead of every candidate measured before it, until the search ends with another
leader or choice (then it is closed), a later search keeps another, or the measurement takes it (on
a GPU each published batch is measured right after its own search, kit.studies.model_benchmark). The
measurement takes it only where it would load exactly that backend and configuration at that batch;
whatever is not taken is closed when the keeper closes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kit.backends import BackendConfig
from kit.search.probe import Probe, ProbeStatus, release


def costly_to_reload(probe: Probe) -> bool:
    """Whether loading `probe`'s configuration again means compiling it again (torch.compile)."""
    return probe.placement.options.compiles


@dataclass
class Kept:
    batch: int
    probe: Probe
    config: BackendConfig
    session: object


class SessionKeeper:
    """The one open session a search hands to its row's measurement."""

    def __init__(self) -> None:
        self._kept: Kept | None = None

    def __enter__(self) -> SessionKeeper:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def offer(self, batch: int, probe: Probe, session, leader: Probe | None) -> bool:
        """Keep `session` (True: the caller must not close it) where `probe` was measured, is costly
        to reload and beats `leader`, the fastest before it; the session kept before is closed."""
        if probe.status != ProbeStatus.MEASURED or not costly_to_reload(probe):
            return False
        if (
            leader is not None
            and leader is not probe
            and (probe.throughput or 0.0) <= (leader.throughput or 0.0)
        ):
            return False
        try:
            config = probe.backend_config()
        except Exception:  # noqa: BLE001 - not kept: the caller closes it as any other
            return False
        before, self._kept = self._kept, Kept(batch, probe, config, session)
        if before is not None:
            _close(before.session)
        return True

    def keep_only(self, batch: int, label: str | None) -> None:
        """Close the session kept at `batch` unless it is the candidate labelled `label` (the leader
        so far, or the one the search chose)."""
        if self._kept is not None and self._kept.batch == batch and self._kept.probe.label != label:
            self.close()

    def keep_batches(self, batches: Iterable[int]) -> None:
        """Close the kept session unless its batch is one of `batches` (the ones to be measured)."""
        if self._kept is not None and self._kept.batch not in set(batches):
            self.close()

    def lend(self, batch: int, probe: Probe):
        """The session kept at `batch` for `probe` (it stays kept: the borrower must not close it),
        or None."""
        kept = self._kept
        return (
            kept.session
            if kept is not None and kept.batch == batch and kept.probe.label == probe.label
            else None
        )

    def take(self, batch: int, backend: str, config: BackendConfig):
        """The session kept at `batch` where it was loaded by `backend` with exactly `config`,
        handed over (the caller closes it); else None, and a session kept at `batch` is closed."""
        kept = self._kept
        if kept is None or kept.batch != batch:
            return None
        self._kept = None
        if kept.probe.placement.backend == backend and kept.config == config:
            return kept.session
        _close(kept.session)
        return None

    def close(self) -> None:
        kept, self._kept = self._kept, None
        if kept is not None:
            _close(kept.session)


class KeepsNothing(SessionKeeper):
    """The keeper of a search no measurement follows (`decide` called on its own, as the search and
    peers benchmarks do): it keeps no session, so each closes where its probe ends."""

    def offer(self, batch: int, probe: Probe, session, leader: Probe | None) -> bool:
        return False


#: Holds nothing, ever: one for every search that has no keeper of its own.
KEEPS_NOTHING = KeepsNothing()


def _close(session) -> None:
    try:
        session.close()
    finally:
        del session
        release()
