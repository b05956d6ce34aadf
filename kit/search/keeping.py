"""The search's leader kept open for the row's own measurement where loading it again means
compiling it again.

A torch.compile'd module has no form on disk: the measurement loading the chosen candidate after
the search compiled it for its probe compiles it a second time (with inductor's caches warm, about a
fifth of the first: 7 s of 36 s for resnet50 on a 2-core EPYC, and a GPU search compiles at every
published batch). OpenVINO, ONNX Runtime and TensorRT reload theirs from their own caches, so they
are not kept. At most one session per batch size is kept besides the candidate being probed: the
fastest costly-to-reload candidate while it leads. The measurement takes it only where it would load
exactly that configuration; whatever is not taken is closed when the keeper closes.
"""

from __future__ import annotations

from dataclasses import dataclass

from kit.backends import BackendConfig
from kit.search.probe import Probe, release


def costly_to_reload(probe: Probe) -> bool:
    """Whether loading `probe`'s configuration again means compiling it again (torch.compile)."""
    return bool(probe.options.get("compile"))


@dataclass
class Kept:
    probe: Probe
    config: BackendConfig
    session: object


class SessionKeeper:
    """The open sessions a search hands to its row's measurement, one per batch size."""

    def __init__(self) -> None:
        self._kept: dict[int, Kept] = {}

    def __enter__(self) -> SessionKeeper:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def offer(self, batch: int, probe: Probe, session, leader: Probe | None) -> bool:
        """Keep `session` (True: the caller must not close it) where `probe` was measured, is costly
        to reload and beats `leader`, the fastest before it; the session kept before it is closed."""
        if probe.status != "measured" or not costly_to_reload(probe):
            return False
        if leader is not None and leader is not probe and (probe.throughput or 0.0) <= (leader.throughput or 0.0):
            return False
        self.discard(batch)
        self._kept[batch] = Kept(probe, probe.backend_config(), session)
        return True

    def keep_only(self, batch: int, label: str | None) -> None:
        """Close the session kept at `batch` unless it is the candidate labelled `label` (the leader
        so far, or the one the search chose)."""
        kept = self._kept.get(batch)
        if kept is not None and kept.probe.label != label:
            self.discard(batch)

    def lend(self, batch: int, probe: Probe):
        """The session kept at `batch` for `probe` (it stays kept: the borrower must not close it), or None."""
        kept = self._kept.get(batch)
        return kept.session if kept is not None and kept.probe.label == probe.label else None

    def take(self, batch: int, config: BackendConfig):
        """The session kept at `batch` where it was loaded with exactly `config`, handed over (the
        caller closes it); else None, and any session kept there is closed."""
        kept = self._kept.pop(batch, None)
        if kept is None:
            return None
        if kept.config == config:
            return kept.session
        _close(kept.session)
        return None

    def discard(self, batch: int) -> None:
        kept = self._kept.pop(batch, None)
        if kept is not None:
            _close(kept.session)

    def close(self) -> None:
        for batch in list(self._kept):
            self.discard(batch)


def _close(session) -> None:
    session.close()
    del session
    release()
