"""The type check `make test` runs (mypy, `[tool.mypy]` in pyproject.toml): strict on the typed
records, the default mode elsewhere in kit/, and a type error in a record fails it.

The checks run mypy with the project's configuration on small stand-in modules named as kit's
(`kit.results.probe`, `kit.other`) in a temporary folder: seconds, not the minute kit/ takes.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytest.importorskip("mypy")

TYPED = "def twice(x: int) -> int:\n    return x * 2\n"
UNTYPED = "def twice(x):\n    return x * 2\n"
WRONG = "def twice(x: int) -> int:\n    return str(x)\n"


def mypy(tmp_path: Path, files: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """mypy with the project's configuration over `files` ({module path: source}) in `tmp_path`."""
    for rel, source in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
        for package in path.relative_to(tmp_path).parents[:-1]:
            (tmp_path / package / "__init__.py").touch()
    args = [
        sys.executable,
        "-m",
        "mypy",
        "--config-file",
        str(ROOT / "pyproject.toml"),
        "--cache-dir",
        str(tmp_path / ".mypy_cache"),
        "--no-site-packages",
        *files,
    ]
    return subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=300)


def errors(run: subprocess.CompletedProcess[str]) -> list[str]:
    return re.findall(r"^(\S+\.py):\d+: error: .*$", run.stdout, flags=re.M)


def test_a_type_error_in_a_typed_record_fails_the_check(tmp_path):
    run = mypy(tmp_path, {"kit/results/probe.py": WRONG})
    assert run.returncode == 1, run.stdout + run.stderr
    assert errors(run) == ["kit/results/probe.py"], run.stdout


def test_the_records_are_strict_and_the_rest_of_kit_is_not(tmp_path):
    """An unannotated function is an error in kit/results/ and kit/search/decision.py only."""
    run = mypy(
        tmp_path,
        {
            "kit/results/probe.py": UNTYPED,
            "kit/search/decision.py": UNTYPED,
            "kit/other.py": UNTYPED,
            "kit/results/typed.py": TYPED,
        },
    )
    assert sorted(errors(run)) == ["kit/results/probe.py", "kit/search/decision.py"], run.stdout


def test_make_test_runs_ruff_and_mypy_before_pytest():
    recipe = re.search(r"^test:.*\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), flags=re.M)
    lines = [line.strip() for line in recipe.group(1).splitlines()]
    assert lines[:-1] == [
        "$(BIN)/lint-imports",
        "$(BIN)/ruff check kit tests benchmarks",
        "$(BIN)/mypy",
    ]
    assert lines[-1].startswith("exec $(BIN)/python -m pytest")


def test_mypy_is_pinned_with_the_other_dev_tools():
    """CI installs from requirements.txt + constraints.txt on a fresh clone: mypy comes with
    them."""
    assert "mypy" in (ROOT / "requirements.txt").read_text().split()
    assert re.search(r"^mypy==\S+$", (ROOT / "constraints.txt").read_text(), flags=re.M)
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert config["files"] == ["kit"]
    assert "strict" not in config, (
        "strict in [tool.mypy] holds for all of kit/: the records name its flags"
    )
