"""The Makefile as a supervisor meets it: a signal to make reaches the kit command it started; a
variable's wrong value stops make before the install; `make bench SMOKE=1` runs the smoke mode."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT

FAKE = """#!/bin/sh
echo $$ > "$KIT_TEST_PIDFILE"
exec sleep 60
"""


def alive(pid: int) -> bool:
    """Running (a zombie waiting for its reaper counts as gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("target", ["reproduce", "rerun", "site", "rebuild-state", "clean-outputs"])
def test_a_sigterm_to_make_reaches_kit(tmp_path, target):
    """Issue 51: `kill <pid of make>` left `kit reproduce` running as an orphan holding outputs/
    (make signals its child, the `sh -c` that ran kit, and kit was not that child)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("kit", "python"):
        (bin_dir / name).write_text(FAKE)
        (bin_dir / name).chmod(0o755)
    pidfile = tmp_path / "kit.pid"
    env = {**os.environ, "KIT_TEST_PIDFILE": str(pidfile), "KIT_OUTPUTS": str(tmp_path / "outputs")}
    make = subprocess.Popen(
        [
            "make",
            "-s",
            "-C",
            str(ROOT),
            "-o",
            ".venv/.installed",
            target,
            f"BIN={bin_dir}",
            "RESULT=x.json",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while not pidfile.exists() or not pidfile.read_text().strip():
        assert make.poll() is None and time.monotonic() < deadline, "make ended before kit started"
        time.sleep(0.05)
    kit = int(pidfile.read_text())
    try:
        make.send_signal(signal.SIGTERM)
        make.wait(timeout=30)
        deadline = time.monotonic() + 10
        while alive(kit) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(kit), f"kit (pid {kit}) runs on after make {target} was stopped"
    finally:
        if alive(kit):
            os.kill(kit, signal.SIGKILL)


def reproduce_choices() -> dict[str, tuple[str, ...]]:
    """kit reproduce's fixed choices, under the Makefile variable that passes each one."""
    from kit.batch.selection import FORCE_VALUES
    from kit.cli.main import build_parser

    sub = next(a for a in build_parser()._actions if a.choices and "reproduce" in a.choices)
    options = {a.dest: a.choices for a in sub.choices["reproduce"]._actions}
    return {
        "PROFILE": tuple(options["profile"]),
        "SEARCH": tuple(options["search"]),
        "PLAN": tuple(options["plan"]),
        "WARM": tuple(options["warm_kernel"]),
        "FORCE": FORCE_VALUES,
    }


def make_dry_run(
    venv: Path, *variables: str, target: str = "reproduce"
) -> subprocess.CompletedProcess:
    """`make -n <target>` with `variables` and a `venv` not made yet: what make would run, the
    environment's install included (nothing runs)."""
    return subprocess.run(
        ["make", "-n", "--no-print-directory", "-C", str(ROOT), target, f"VENV={venv}"]
        + list(variables),
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("variable", ["PROFILE", "SEARCH", "PLAN", "WARM", "FORCE"])
def test_a_wrong_choice_is_refused_before_the_install(variable, tmp_path):
    """`make reproduce WARM=maybe` installed the environment (minutes, GB) and only then did kit
    refuse the value. Every value kit accepts passes the Makefile's check; others stop make before
    a command runs, naming the value and the choices."""
    allowed = reproduce_choices()[variable]
    for value in allowed:
        proc = make_dry_run(tmp_path / "venv", f"{variable}={value}")
        assert proc.returncode == 0, proc.stderr
        assert "pip install" in proc.stdout and "kit reproduce" in proc.stdout
    for wrong in ("maybe", " ".join(allowed), ""):
        proc = make_dry_run(tmp_path / "venv", f"{variable}={wrong}")
        assert proc.returncode == 2 and not proc.stdout.strip(), proc.stdout
        assert f"invalid {variable}='{wrong}': one of {' '.join(allowed)}" in proc.stderr


@pytest.mark.parametrize(("smoke", "args"), [("1", ["--smoke"]), ("0", []), (None, [])])
def test_make_bench_runs_at_its_smallest_with_smoke_1(smoke, args, tmp_path):
    """`make bench` could run small only as `python -m benchmarks.run_all --smoke`: SMOKE=1 passes
    `--smoke`, and make runs it (a stand-in python records what it was given)."""
    variables = [] if smoke is None else [f"SMOKE={smoke}"]
    proc = make_dry_run(tmp_path / "venv", *variables, target="bench")
    assert proc.returncode == 0, proc.stderr
    command = ["exec", f"{tmp_path}/venv/bin/python", "-m", "benchmarks.run_all", *args]
    assert "pip install" in proc.stdout and command in [
        ln.split() for ln in proc.stdout.splitlines()
    ]
    bin_dir, given = tmp_path / "bin", tmp_path / "argv"
    bin_dir.mkdir()
    (bin_dir / "python").write_text(f'#!/bin/sh\necho "$@" > {given}\n')
    (bin_dir / "python").chmod(0o755)
    make = ["make", "-s", "-C", str(ROOT), "-o", ".venv/.installed", "bench", f"BIN={bin_dir}"]
    subprocess.run(make + variables, check=True, timeout=60)
    assert given.read_text().split() == ["-m", "benchmarks.run_all", *args]


@pytest.mark.parametrize("wrong", ["yes", "0 1", ""])
def test_a_wrong_smoke_is_refused_before_the_install(wrong, tmp_path):
    proc = make_dry_run(tmp_path / "venv", f"SMOKE={wrong}", target="bench")
    assert proc.returncode == 2 and not proc.stdout.strip(), proc.stdout
    assert f"invalid SMOKE='{wrong}': one of 0 1" in proc.stderr
