"""Whether a figure measured on the published part was measured the published way: the batch size,
clients, precision, ByteMLPerf's passes and runtime mode (pack or padded), and the PopRT version.
Each difference is a reason the verdict is "not comparable" rather than "reproduced" or "differs"."""

from __future__ import annotations

from dataclasses import dataclass

from kit.published import figures as published
from kit.results import RunResult


@dataclass(frozen=True)
class PublishedRun:
    """How ByteMLPerf ran one row on the IPU: batch size, clients, precision, PopRT, pack mode."""

    batch: int | None
    clients: int
    precision: str
    poprt_version: str
    pack: bool

    @classmethod
    def of(cls, model: str, precision: str, batch: int | None) -> PublishedRun:
        settings = published.ipu_run_settings(model, precision)
        model_settings = published.ipu_model_settings(model).get("settings") or {}
        return cls(batch, settings["clients"], precision.lower(),  # FP16 -> fp16, FP8 -> fp8
                   published.poprt_version(model, precision), "pack_config" in model_settings)


def measured_batch(m: dict) -> int:
    """The batch size a measurement stands for: a pack-mode run's pack batch, else its calls'."""
    return (m.get("extra") or {}).get("pack_batch_size") or m["batch_size"]


def differences(res: RunResult, measurement: dict | None, run: PublishedRun) -> list[str]:
    """Every way `measurement` of `res` was not measured as `run` was (empty: measured the same way)."""
    session = (res.backend or {}).get("session") or {}
    reasons = session_differences(session)
    precision = (res.backend or {}).get("precision")
    if precision and precision != run.precision:
        reasons.append(f"precision {precision}, published {run.precision}")
    version = session.get("poprt_version")
    if version and run.poprt_version[:1].isdigit() and version != run.poprt_version:
        reasons.append(f"PopRT {version}, published with PopRT {run.poprt_version}")
    if measurement is not None:
        reasons += measurement_differences(measurement, run)
    return reasons


def session_differences(session: dict) -> list[str]:
    """What the session itself says keeps it from ByteMLPerf's recipe (passes, settings)."""
    if session.get("comparable") is not False:
        return []
    missing = session.get("missing_passes") or []
    said = list(session.get("not_comparable") or [])
    if missing:
        said.insert(0, f"ByteMLPerf's {', '.join(missing)} not applied")
    return said or ["the session's settings are not ByteMLPerf's (see its notes)"]


def measurement_differences(m: dict, run: PublishedRun) -> list[str]:
    reasons = []
    batch = measured_batch(m)
    if run.batch is not None and batch != run.batch:
        reasons.append(f"batch {batch}, published at batch {run.batch}")
    pack = m.get("mode") == "pack"
    if run.pack and not pack:
        reasons.append("padded batches, published in pack mode")
    clients = m["threads"] if m.get("mode") == "clients" else 1
    if not pack and clients != run.clients:
        reasons.append(f"{clients} client(s), published with {run.clients}")
    return reasons
