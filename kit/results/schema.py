"""The result JSON's schema versions, and the one place a file of an older one is brought up to
date.

Version 1 grew by additions only: `environment` gained `kit`, `distributions`, `published_data` and
`job`, `model` its `onnx_sha256`, `numerics` their `histograms`. Version 2 is version 1 with every
one of those keys present (None or empty where the run did not record it), so a reader of a
version-2 result never asks whether a key exists. Version 3 writes a code beside each reason
(kit.results.reasons): an accuracy check's `reason_code`, a C2 row's `<figure>_reason_code`, an
IPU session's `not_comparable_codes`; an older file's are read from its sentences here, once
(kit.results.legacy). Version 4 records a torch.compile that fell back to eager as the session's
`compile_fallback` (why it failed); an older file said so only in a note, read here once. Version 5
writes a server study's skipped C2 prediction as its `c2_prediction_skipped` table (the reason);
an older file said so only in a note, read here once. A reader
upgrades on load (as asv's `update_to_2`); nothing else branches
on the version.

>>> upgrade({"schema_version": 1, "environment": {}, "numerics": [{}]})["environment"]["kit"] is None
True
"""  # noqa: E501

from __future__ import annotations

from typing import Any

from kit.errors import KitError
from kit.results.legacy import (
    accuracy_code,
    c2_prediction_skipped,
    code_from_text,
    compile_fallback,
    failed_batches,
)
from kit.results.reasons import DifferenceCode
from kit.results.tables import C2_FIGURES

SCHEMA_VERSION = 5
OLDEST = 1  # the oldest schema_version this kit reads (upgrading it)


class UnsupportedVersion(KitError):
    """A result JSON of a schema_version this kit does not read (written by another kit)."""


class UnreadableResult(KitError):
    """A result JSON (it names its kind, name, parameters and environment) whose contents this kit
    cannot read: a section of another shape, a value its record cannot hold."""


class CorruptResult(KitError):
    """A .json file that is not JSON text at all (cut short by a full disk or a stopped copy, or
    binary): never another tool's JSON, so a reader of a folder names it instead of passing it."""


def version_problem(data: dict[str, Any]) -> str | None:
    """Why this kit cannot read a result JSON of `data`'s schema_version, or None when it can."""
    version = data.get("schema_version")
    if (
        isinstance(version, int)
        and not isinstance(version, bool)
        and OLDEST <= version <= SCHEMA_VERSION
    ):
        return None
    return (
        f"result schema_version {version!r} is not supported (this kit reads {OLDEST} to "
        f"{SCHEMA_VERSION})"
    )


def upgrade(data: dict[str, Any]) -> dict[str, Any]:
    """`data` (a result JSON of a version this kit reads) at SCHEMA_VERSION; the input is left as it
    was."""
    if problem := version_problem(data):
        raise UnsupportedVersion(problem)
    if data["schema_version"] < 2:
        data = update_to_2(data)
    if data["schema_version"] < 3:
        data = update_to_3(data)
    if data["schema_version"] < 4:
        data = update_to_4(data)
    if data["schema_version"] < 5:
        data = update_to_5(data)
    return data


def update_to_2(data: dict[str, Any]) -> dict[str, Any]:
    """Version 1 -> 2: the keys version 1 added over time, present in every section."""
    out = dict(data, schema_version=2)
    env = dict(data.get("environment") or {})
    for key, empty in (("kit", None), ("distributions", {}), ("published_data", {}), ("job", {})):
        env.setdefault(key, empty)
    out["environment"] = env
    if isinstance(data.get("model"), dict):
        out["model"] = {"onnx_sha256": None, **data["model"]}
    out["numerics"] = [
        {"histograms": None, **n} if isinstance(n, dict) else n for n in data.get("numerics") or []
    ]
    return out


def update_to_3(data: dict[str, Any]) -> dict[str, Any]:
    """Version 2 -> 3: the code beside each reason, read from the sentence an older kit wrote
    (kit.results.legacy); an IPU session's own reasons are coded SESSION (said by their sentence);
    a model benchmark's failed batches, read from its errors, as the table version 3 writes."""
    out = dict(data, schema_version=3)
    out["accuracy"] = [
        {**a, "reason_code": accuracy_code(a.get("status"))} if isinstance(a, dict) else a
        for a in data.get("accuracy") or []
    ]
    tables = data.get("tables")
    if isinstance(tables, dict) and isinstance(tables.get("c2"), list):
        out["tables"] = {
            **tables,
            "c2": [_coded_c2_row(r) if isinstance(r, dict) else r for r in tables["c2"]],
        }
    failed = failed_batches(data.get("errors")) if data.get("kind") == "model_benchmark" else []
    if failed and isinstance(tables, dict) and "failed_batches" not in tables:
        out["tables"] = {**out.get("tables", tables), "failed_batches": failed}
    backend = data.get("backend")
    session = backend.get("session") if isinstance(backend, dict) else None
    if (
        isinstance(backend, dict)
        and isinstance(session, dict)
        and isinstance(session.get("not_comparable"), list)
    ):
        codes = [str(DifferenceCode.SESSION)] * len(session["not_comparable"])
        out["backend"] = {**backend, "session": {**session, "not_comparable_codes": codes}}
    return out


def update_to_4(data: dict[str, Any]) -> dict[str, Any]:
    """Version 3 -> 4: a torch.compile that fell back to eager, as the session's `compile_fallback`
    (the reason), read from the note an older kit wrote (kit.results.legacy)."""
    out = dict(data, schema_version=4)
    backend = data.get("backend")
    session = backend.get("session") if isinstance(backend, dict) else None
    if (
        isinstance(backend, dict)
        and isinstance(session, dict)
        and "compile_fallback" not in session
    ):
        if reason := compile_fallback(session.get("notes")):
            out["backend"] = {**backend, "session": {**session, "compile_fallback": reason}}
    return out


def update_to_5(data: dict[str, Any]) -> dict[str, Any]:
    """Version 4 -> 5: a server study's skipped C2 prediction, as its `c2_prediction_skipped`
    table (the reason), read from the note an older kit wrote (kit.results.legacy)."""
    out = dict(data, schema_version=5)
    tables = data.get("tables")
    if (
        data.get("kind") == "server_scenario"
        and isinstance(tables, dict)
        and "c2_prediction_skipped" not in tables
        and (reason := c2_prediction_skipped(data.get("notes")))
    ):
        out["tables"] = {**tables, "c2_prediction_skipped": reason}
    return out


def _coded_c2_row(row: dict[str, Any]) -> dict[str, Any]:
    codes = {
        f"{k}_reason_code": str(code_from_text(str(row[f"{k}_reason"])))
        for k in C2_FIGURES
        if row.get(f"{k}_reason")
    }
    return {**row, **codes}
