"""The result JSON's schema versions, and the one place a file of an older one is brought up to date.

Version 1 grew by additions only: `environment` gained `kit`, `distributions`, `published_data` and
`job`, `model` its `onnx_sha256`, `numerics` their `histograms`. Version 2 is version 1 with every
one of those keys present (None or empty where the run did not record it), so a reader of a
version-2 result never asks whether a key exists. A reader upgrades on load (as asv's
`update_to_2`); nothing else branches on the version.

>>> upgrade({"schema_version": 1, "environment": {}, "numerics": [{}]})["environment"]["kit"] is None
True
"""

from __future__ import annotations

from typing import Any

from kit.errors import KitError

SCHEMA_VERSION = 2
OLDEST = 1  # the oldest schema_version this kit reads (upgrading it)


class UnsupportedVersion(KitError):
    """A result JSON of a schema_version this kit does not read (written by another kit)."""


def version_problem(data: dict[str, Any]) -> str | None:
    """Why this kit cannot read a result JSON of `data`'s schema_version, or None when it can."""
    version = data.get("schema_version")
    if isinstance(version, int) and not isinstance(version, bool) and OLDEST <= version <= SCHEMA_VERSION:
        return None
    return f"result schema_version {version!r} is not supported (this kit reads {OLDEST} to {SCHEMA_VERSION})"


def upgrade(data: dict[str, Any]) -> dict[str, Any]:
    """`data` (a result JSON of a version this kit reads) at SCHEMA_VERSION; the input is left as it was."""
    if problem := version_problem(data):
        raise UnsupportedVersion(problem)
    if data["schema_version"] < 2:
        data = update_to_2(data)
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
    out["numerics"] = [{"histograms": None, **n} if isinstance(n, dict) else n
                       for n in data.get("numerics") or []]
    return out
