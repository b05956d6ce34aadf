"""Declared schemas of data/published/*.csv, checked when a file is loaded.

A malformed file is an error naming the file, the line (as an editor counts it: the header is
line 1) and the column, never a silent change: a row with an extra or a missing field, an empty
required cell, a non-numeric number, a non-positive QPS, latency or throughput, a study or a
precision that is none of its enum's members (kit.published.studies, kit.precision).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

import pandas as pd

from kit.errors import KitError
from kit.precision import PublishedPrecision
from kit.published.studies import PublishedStudy


class PublishedDataError(KitError):
    """A published-figures file that does not match its declared schema."""

    def __init__(self, path: Path, line: int | None, column: str | None, problem: str):
        self.path, self.line, self.column, self.problem = Path(path), line, column, problem
        where = ", ".join(
            p for p in (f"line {line}" if line else "", f"column {column!r}" if column else "") if p
        )
        super().__init__(f"{self.path}: {where + ': ' if where else ''}{problem}")


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _positive_int(text: str) -> bool:
    return text.isdigit() and int(text) > 0


@dataclass(frozen=True, kw_only=True)
class Schema:
    """Columns in order; which must be filled; which hold positive integers when filled; the
    column groups no two rows may share (a figure's identity: a duplicate would be averaged, or
    break a pivot, downstream); and the `value` column's rule: a finite number unless the row's
    unit says text, positive for the metrics in `positive_metrics`."""

    columns: tuple[str, ...]
    required: tuple[str, ...] = ()
    positive_ints: tuple[str, ...] = ()
    unique: tuple[tuple[str, ...], ...] = ()
    text_units: frozenset[str] = frozenset()
    positive_metrics: frozenset[str] = frozenset()
    members: tuple[tuple[str, type[StrEnum]], ...] = ()  # (column, the enum its filled cells name)
    row_checks: tuple[Callable[[dict], tuple[str, str] | None], ...] = field(default=())


FIGURES = Schema(
    columns=(
        "figure_id",
        "study",
        "table",
        "model",
        "precision",
        "batch_size",
        "metric",
        "value",
        "unit",
        "printed",
        "dataset",
        "hardware",
        "source",
        "note",
    ),
    required=(
        "figure_id",
        "study",
        "table",
        "metric",
        "value",
        "unit",
        "printed",
        "hardware",
        "source",
    ),
    positive_ints=("batch_size",),
    unique=(("figure_id",), ("study", "table", "model", "precision", "batch_size", "metric")),
    text_units=frozenset({"date", "rule", "tool", "version", "string"}),
    positive_metrics=frozenset({"QPS", "Latency", "Throughput", "Energy efficiency"}),
    members=(("study", PublishedStudy),),
)
REPORTS = Schema(
    columns=("model", "precision", "batch_size", "metric", "value", "unit", "source_path"),
    required=("model", "precision", "metric", "value", "unit", "source_path"),
    positive_ints=("batch_size",),
    unique=(("model", "precision", "batch_size", "metric"),),
    text_units=frozenset({"git commit", "json", "note", "png filename", "string", "version"}),
    positive_metrics=frozenset(
        {
            "Performance/QPS",
            "Performance/AVG Latency",
            "Performance/P99 Latency",
            "README table/QPS (headline)",
        }
    ),
    members=(("precision", PublishedPrecision),),
)
MODEL_SPECS = Schema(
    columns=(
        "model",
        "has_ipu_report",
        "framework",
        "framework_version",
        "model_format",
        "model_path",
        "input_name",
        "input_shape_in_model_zoo",
        "dtype",
        "max_batch_size",
        "layout",
        "outputs",
        "dataset_name",
        "workload_batch_sizes",
        "ipu_interact_batch_sizes",
        "ipu_pack_batch_size",
        "ipu_clients",
        "note",
        "source_path",
    ),
    required=(
        "model",
        "framework",
        "input_name",
        "input_shape_in_model_zoo",
        "dtype",
        "max_batch_size",
        "dataset_name",
        "source_path",
    ),
    positive_ints=("max_batch_size", "ipu_pack_batch_size", "ipu_clients"),
    unique=(("model", "input_name"),),
)
SCHEMAS = {
    "figures.csv": FIGURES,
    "bytemlperf_ipu_reports.csv": REPORTS,
    "bytemlperf_model_specs.csv": MODEL_SPECS,
}


def _check_value(schema: Schema, row: dict) -> str | None:
    if "value" not in schema.columns or row["unit"] in schema.text_units:
        return None
    number = _number(row["value"])
    if number is None:
        return (
            f"not a finite number (unit {row['unit']!r} is numeric; text units are "
            f"{sorted(schema.text_units)})"
        )
    if row["metric"] in schema.positive_metrics and number <= 0:
        return f"{row['metric']} must be positive"
    return None


def check_rows(
    path: Path, schema: Schema, header: list[str], rows: list[tuple[int, list[str]]]
) -> None:
    """Raise PublishedDataError at the first cell that breaks `schema`."""
    if tuple(header) != schema.columns:
        missing = [c for c in schema.columns if c not in header]
        extra = [c for c in header if c not in schema.columns]
        raise PublishedDataError(
            path,
            1,
            None,
            f"header {header} is not the declared columns "
            f"{list(schema.columns)} (missing {missing}, unexpected {extra})",
        )
    seen: dict[tuple, int] = {}
    for line, fields in rows:
        if len(fields) != len(header):
            raise PublishedDataError(
                path,
                line,
                None,
                f"{len(fields)} fields where the header has "
                f"{len(header)} (a stray or missing comma?)",
            )
        row = dict(zip(header, fields, strict=True))
        for column in schema.required:
            if not row[column].strip():
                raise PublishedDataError(path, line, column, "empty, but every row must fill it")
        for column in schema.positive_ints:
            if row[column] and not _positive_int(row[column]):
                raise PublishedDataError(
                    path, line, column, f"{row[column]!r} is not a positive whole number"
                )
        for column, kind in schema.members:
            if row[column] and row[column] not in {m.value for m in kind}:
                raise PublishedDataError(
                    path,
                    line,
                    column,
                    f"{row[column]!r} is not one of {', '.join(m.value for m in kind)}",
                )
        for columns in schema.unique:
            key = (columns, tuple(row[c] for c in columns))
            first = seen.setdefault(key, line)
            if first != line:
                raise PublishedDataError(
                    path,
                    line,
                    columns[0] if len(columns) == 1 else None,
                    _repeat(row, columns, first),
                )
        problem = _check_value(schema, row)
        if problem:
            raise PublishedDataError(path, line, "value", f"{row['value']!r}: {problem}")


def _repeat(row: dict, columns: tuple[str, ...], first: int) -> str:
    if len(columns) == 1:
        return f"{row[columns[0]]!r} repeats line {first}"
    same = ", ".join(f"{c}={row[c]!r}" for c in columns)
    return f"duplicates line {first} ({same}); one figure, one row: remove or correct one of them"


def read_published_csv(path: Path | str, schema: Schema | None = None) -> pd.DataFrame:
    """The file as a DataFrame of strings, after checking every row against its schema (by file
    name when `schema` is not given)."""
    path = Path(path)
    schema = schema or SCHEMAS.get(path.name)
    if schema is None:
        raise PublishedDataError(
            path, None, None, f"no declared schema; known files: {sorted(SCHEMAS)}"
        )
    try:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.reader(f)
            header = next(reader, None)
            rows = [(reader.line_num, r) for r in reader if r]
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise PublishedDataError(path, None, None, f"cannot be read as CSV ({exc})") from exc
    if header is None:
        raise PublishedDataError(path, 1, None, "empty file: no header")
    check_rows(path, schema, header, rows)
    return pd.DataFrame([r for _, r in rows], columns=header, dtype=str)
