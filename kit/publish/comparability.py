"""Whether a figure measured on the published part was measured the published way: the batch size,
clients, precision, ByteMLPerf's passes and runtime mode (pack or padded), and the PopRT version.
Each difference is a reason the verdict is "not comparable" rather than "reproduced" or
"differs"."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kit.precision import PublishedPrecision, RunPrecision
from kit.publish.compare import DifferenceCode, Reason
from kit.published import figures as published
from kit.results import RunResult
from kit.results.session import Session
from kit.results.windows import Measurement


@dataclass(frozen=True)
class PublishedRun:
    """How ByteMLPerf ran one row on the IPU: batch size, clients, precision, PopRT, pack mode."""

    batch: int | None
    clients: int
    precision: RunPrecision
    poprt_version: str
    pack: bool

    @classmethod
    def of(cls, model: str, precision: str, batch: int | None) -> PublishedRun:
        settings = published.ipu_run_settings(model, precision)
        model_settings = published.ipu_model_settings(model).get("settings") or {}
        return cls(
            batch,
            settings["clients"],
            PublishedPrecision.parse(precision).as_run,
            published.poprt_version(model, precision),
            "pack_config" in model_settings,
        )


def differences(res: RunResult, measurement: Measurement | None, run: PublishedRun) -> list[Reason]:
    """Every way `measurement` of `res` was not measured as `run` was (empty: measured the same
    way). What is judged is what ran `measurement` (each batch loads its own session and, where
    each batch is searched, runs its own plan), the headline's where a result did not record it."""
    backend = res.sections.backend.at(measurement) if res.sections.backend else None
    session = backend.session if backend else Session()
    reasons = session_differences(session)
    precision = backend.precision if backend else None
    if precision and precision != run.precision:
        reasons.append(
            Reason(f"precision {precision}, published {run.precision}", DifferenceCode.PRECISION)
        )
    version = session.poprt_version
    if version and run.poprt_version[:1].isdigit() and version != run.poprt_version:
        reasons.append(
            Reason(
                f"PopRT {version}, published with PopRT {run.poprt_version}", DifferenceCode.POPRT
            )
        )
    if measurement is not None:
        reasons += measurement_differences(measurement, run)
    return reasons


def session_differences(session: Session | Mapping) -> list[Reason]:
    """What the session itself says keeps it from ByteMLPerf's recipe (passes, settings); `session`
    a result's record or the description a backend wrote."""
    if isinstance(session, Mapping):
        session = Session.from_dict(session)
    if session.comparable is not False:
        return []
    said = list(session.differences)
    if session.missing_passes:
        said.insert(
            0,
            Reason(
                f"ByteMLPerf's {', '.join(session.missing_passes)} not applied",
                DifferenceCode.PASSES,
            ),
        )
    return said or [
        Reason(
            "the session's settings are not ByteMLPerf's (see its notes)", DifferenceCode.SESSION
        )
    ]


def measurement_differences(m: Measurement | Mapping, run: PublishedRun) -> list[Reason]:
    """The ways measurement `m` (a record, or a measurement dict as a run wrote it) was not run as
    `run`."""
    m = Measurement.of(m)
    reasons: list[Reason] = []
    batch = m.measured_batch
    if run.batch is not None and batch != run.batch:
        reasons.append(
            Reason(f"batch {batch}, published at batch {run.batch}", DifferenceCode.BATCH)
        )
    pack = m.mode == "pack"
    if run.pack and not pack:
        reasons.append(Reason("padded batches, published in pack mode", DifferenceCode.PADDED))
    clients = m.threads if m.mode == "clients" else 1
    if not pack and clients != run.clients:
        reasons.append(
            Reason(f"{clients} client(s), published with {run.clients}", DifferenceCode.CLIENTS)
        )
    return reasons
