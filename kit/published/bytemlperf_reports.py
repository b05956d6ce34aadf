"""ByteMLPerf's report format, read and checked: `<Backend>/<model>/result[-<precision>].json`.

ByteMLPerf's report writer (general_perf/core/perf_engine.py, a30b4f9) fills `Model`, `Backend`,
`Host Info`, `Dataset`, `Instance Count`, `Device Count`, `Graph Compile` {Compile Duration,
Compile Precision, Subgraph Coverage, Optimizations}, `Accuracy` {Data Percent, the dataset's
metric, Mean/Std/Max Diff, Max/Mean Rel-Diff, Diff Dist} and `Performance` [{BS, QPS, AVG Latency,
P99 Latency}] (ms). Vendors' files differ in key order and in which keys they carry (STC writes
`AVG_Latency`); only `Model`, `Backend` and `Performance` are in every one. One reader serves the
kit's own export (its format test) and `kit import-bytemlperf`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from kit.errors import KitError
from kit.precision import report_spelling

REQUIRED: dict[str, type | str] = {"Model": str, "Backend": str, "Performance": list}
#: Where a field is present it has this type ("number": int or float, never bool).
TYPES: dict[str, type | str] = {
    "Host Info": str,
    "Dataset": str,
    "Instance Count": "number",
    "Device Count": "number",
    "Graph Compile": dict,
    "Accuracy": dict,
    "Version": str,
    "Execution Date": str,
    "Weights": str,  # the kit's own field (kit.publish.bytemlperf_export.KIT_FIELDS)
}
PERFORMANCE: dict[str, type | str] = {
    "BS": int,
    "QPS": "number",
    "AVG Latency": "number",
    "P99 Latency": "number",
}
#: Other spellings vendors write, read under ByteMLPerf's own names.
ALIASES = {"AVG_Latency": "AVG Latency", "P99_Latency": "P99 Latency"}
NAME = re.compile(r"^result(?:-(?P<precision>[A-Za-z0-9_]+))?\.json$")


class ReportError(KitError, ValueError):
    """A ByteMLPerf report that is not in ByteMLPerf's format: the file and field are named."""

    def __init__(self, path: Path, field: str, problem: str):
        super().__init__(
            f"{path}: {field} {problem} (ByteMLPerf's report format: "
            f"<Backend>/<model>/result[-<precision>].json with Model, Backend and "
            f"Performance [{{BS, QPS, AVG Latency, P99 Latency}}])"
        )
        self.path, self.field = path, field


def _is(value: object, kind: type | str) -> bool:
    if isinstance(kind, str):  # "number"
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, kind) and not (kind is int and isinstance(value, bool))


def _type_name(kind: type | str) -> str:
    return (
        kind
        if isinstance(kind, str)
        else {str: "a string", list: "a list", dict: "an object", int: "an integer"}[kind]
    )


def _check_backend_name(path: Path, backend: str) -> None:
    """`Backend` names the report's folder (`<Backend>/<model>/`), so it must be one plain folder
    name: a third-party report never decides where the kit writes."""
    if (
        backend in ("", ".", "..")
        or any(c in backend for c in "/\\\0")
        or Path(backend).is_absolute()
    ):
        raise ReportError(
            path,
            "field 'Backend'",
            f"is {backend!r}, not a plain folder name (no '/', '\\', '..' or absolute path)",
        )


def read_report(path: str | Path) -> dict:
    """The report at `path`, checked field by field (ReportError names the file and field)."""
    path = Path(path)
    try:
        report = json.loads(path.read_text())
    except OSError as exc:
        raise ReportError(path, "the file", f"cannot be read ({exc.strerror})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ReportError(path, "the file", f"is not JSON ({exc})") from None
    if not isinstance(report, dict):
        raise ReportError(path, "the file", f"holds a JSON {type(report).__name__}, not an object")
    for field, kind in {**REQUIRED, **TYPES}.items():
        if field not in report:
            if field in REQUIRED:
                raise ReportError(path, f"field {field!r}", "is missing")
            continue
        if not _is(report[field], kind):
            raise ReportError(
                path, f"field {field!r}", f"is {report[field]!r}, not {_type_name(kind)}"
            )
    _check_backend_name(path, report["Backend"])
    for i, entry in enumerate(report["Performance"]):
        if not isinstance(entry, dict):
            raise ReportError(path, f"Performance[{i}]", f"is {entry!r}, not an object")
        named = {ALIASES.get(k, k): v for k, v in entry.items()}
        if "BS" not in named:
            raise ReportError(path, f"Performance[{i}].BS", "is missing")
        for key, kind in PERFORMANCE.items():
            if key in named and not _is(named[key], kind):
                raise ReportError(
                    path, f"Performance[{i}].{key}", f"is {named[key]!r}, not {_type_name(kind)}"
                )
    return report


def precision_of(path: Path, report: dict) -> str:
    """The precision a report measured: its file name's (`result-fp16.json`), else its
    `Graph Compile`'s `Compile Precision`, upper case; '' when neither says."""
    match = NAME.match(path.name)
    if match and match["precision"]:
        return report_spelling(match["precision"])
    return report_spelling((report.get("Graph Compile") or {}).get("Compile Precision", ""))


def flatten(report: dict) -> list[dict]:
    """One row per figure: {metric ("Group/Key" as in data/published/bytemlperf_ipu_reports.csv),
    value, batch_size (None outside Performance)}; vendors' aliases read under ByteMLPerf's
    names."""
    rows = []
    for key, value in report.items():
        if key == "Performance":
            for entry in value:
                named = {ALIASES.get(k, k): v for k, v in entry.items()}
                rows += [
                    {"metric": f"Performance/{k}", "value": v, "batch_size": named["BS"]}
                    for k, v in named.items()
                    if k != "BS"
                ]
        elif isinstance(value, dict) and key in ("Graph Compile", "Accuracy"):
            rows += [
                {"metric": f"{key}/{k}", "value": v, "batch_size": None} for k, v in value.items()
            ]
        else:
            rows.append({"metric": key, "value": value, "batch_size": None})
    return rows


def key_types(report: dict) -> dict[str, str]:
    """Every key path of a report with its JSON type ("Performance[]/QPS": "number"): what the
    format test compares between a published report and the kit's."""

    def kind(value: object) -> str:
        if isinstance(value, bool):
            return "boolean"
        if isinstance(value, int | float):
            return "number"
        names: dict[type, str] = {str: "string", list: "array", dict: "object"}
        return names.get(type(value), type(value).__name__)

    out: dict[str, str] = {}
    for key, value in report.items():
        out[key] = kind(value)
        if isinstance(value, dict):
            out.update({f"{key}/{k}": kind(v) for k, v in value.items()})
        elif key == "Performance":
            for entry in value:
                out.update(
                    {f"Performance[]/{ALIASES.get(k, k)}": kind(v) for k, v in entry.items()}
                )
    return out


def report_files(folder: str | Path) -> list[Path]:
    """Every `<Backend>/<model>/result[-<precision>].json` under `folder` (a reports folder, one
    vendor's folder or one model's), sorted; a folder without any is an error."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ReportError(folder, "the folder", "does not exist or is not a folder")
    found = sorted(p for p in folder.rglob("result*.json") if NAME.match(p.name))
    if not found:
        raise ReportError(folder, "the folder", "holds no result[-<precision>].json file")
    return found
