"""Hardware kinds are objects in one registry (kit.hardware.kinds): nothing else in kit/ compares a
kind to a kind's name, and what each floor decides per kind is keyed by the registry's kinds."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from kit.errors import InvalidParameter
from kit.hardware import kinds
from kit.measure.power import SENSORS
from kit.search.candidates import ROW_CANDIDATES
from kit.search.precision_map import MAPPINGS

KIT = Path(__file__).resolve().parents[2] / "kit"
KINDS_MODULE = KIT / "hardware" / "kinds.py"
#: Names a kind is held in (a variable `kind`, `cfg.hardware`, `info.get("kind")`, `kinds` ...).
KIND_WORDS = ("kind", "hardware")


def _kind_literal(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return node.value in kinds.KINDS
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(_kind_literal(e) for e in node.elts)
    return False


def _holder(node: ast.AST) -> str:
    """The name a compared value is held in: `kind`, `cfg.hardware` -> 'hardware', `d["kind"]`,
    `d.get("kind")` -> 'kind'; '' for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        return str(node.slice.value)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get"
        and node.args
        and isinstance(node.args[0], ast.Constant)
    ):
        return str(node.args[0].value)
    return ""


def bare_kind_comparisons(source: str) -> list[int]:
    """Lines comparing a kind-holding name to a kind's name (==, !=, in, not in), either way
    round."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        literal = [s for s in sides if _kind_literal(s)]
        held = [s for s in sides if any(w in _holder(s).lower() for w in KIND_WORDS)]
        if literal and held:
            lines.append(node.lineno)
    return lines


def test_the_scan_finds_the_comparisons_it_guards_against():
    found = bare_kind_comparisons(
        'if kind == "ipu": pass\nif cfg.hardware != "cpu": pass\n'
        'if info.get("kind") != "ipu": pass\nif "cuda" in kinds: pass\n'
        'if hardware not in ("cpu", "cuda"): pass\nif config.device == "cpu": pass\n'
        "if kinds.get(kind).published_settings: pass\n"
    )
    assert found == [1, 2, 3, 4, 5]


def test_no_module_outside_kinds_compares_a_kind_to_a_name():
    """A kind is decided by its object's fields and hooks, not by `kind == "cuda"` in place: a new
    kind then touches the files docs/architecture.md lists, not every comparison."""
    offenders = [
        f"{path.relative_to(KIT.parent)}:{line}"
        for path in sorted(KIT.rglob("*.py"))
        if path != KINDS_MODULE
        for line in bare_kind_comparisons(path.read_text())
    ]
    assert offenders == []


def test_every_floors_table_is_keyed_by_registered_kinds():
    assert set(SENSORS) == set(kinds.KINDS) == set(MAPPINGS)
    assert set(ROW_CANDIDATES) == {k for k in kinds.KINDS if not kinds.get(k).published_settings}


def test_the_kinds_derived_tables_follow_the_registry():
    order = kinds.PREFERENCE  # a kind added later may sit anywhere between
    assert order[0] == "ipu" and order[-1] == "cpu" and order.index("cuda") < order.index("cpu")
    assert {
        "cpu": "cpu",
        "cuda": "cuda",
        "tensorrt": "cuda",
        "ipu": "ipu",
    }.items() <= kinds.DEVICE_KIND.items()
    assert kinds.of_class("gpu") is kinds.CUDA and kinds.of_class("tpu") is None
    assert kinds.get("cpu").key_facts() == {"gpus": []}
    with pytest.raises(InvalidParameter, match="hardware='tpu'.*one of cpu, cuda, ipu"):
        kinds.get("tpu")
