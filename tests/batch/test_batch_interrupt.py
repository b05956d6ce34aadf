"""Ctrl-C / SIGTERM during a real batch: the notebook's whole process tree goes, kernel and its
children included; the job is recorded as interrupted, state.json stays valid, the next run
resumes."""

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from kit.batch.state import read_state
from tests.batch_notebooks import make_ok_notebook
from tests.conftest import ROOT

DRIVER = """
import sys
import kit.cli.reproduce as cli
from kit.batch import Job
jobs = [Job("quick", "ok.ipynb"), Job("sleeper", "sleeper.ipynb", {}, 300)][int(sys.argv[1]):]
cli.jobs_for = lambda profile, hardware, research=False, search=True: jobs
from kit.cli.main import main
sys.exit(main(["reproduce", "--hardware", "cpu"]))
"""

SLEEPER = """
import os, subprocess, time
from pathlib import Path
if Path(os.environ["SLEEP_FLAG"]).exists():
    child = subprocess.Popen(["sleep", "300"])  # a process the kernel started
    Path(os.environ["SLEEP_MARK"]).write_text(f"{os.getpid()} {child.pid}")
    time.sleep(300)
"""


@pytest.fixture
def batch(tmp_path):
    """Starts the batch (quick job first unless skip_quick) in a session of its own, like a shell
    job."""
    folder = tmp_path / "notebooks"
    folder.mkdir()
    make_ok_notebook(folder / "ok.ipynb")
    make_ok_notebook(folder / "sleeper.ipynb", before=SLEEPER)
    (tmp_path / "driver.py").write_text(DRIVER)
    (tmp_path / "flag").write_text("sleep")
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "KIT_NOTEBOOKS": str(folder),
        "KIT_OUTPUTS": str(tmp_path / "outputs"),
        "SLEEP_FLAG": str(tmp_path / "flag"),
        "SLEEP_MARK": str(tmp_path / "mark"),
    }
    started = []

    def start(skip_quick: int = 0) -> subprocess.Popen:
        proc = subprocess.Popen(
            [sys.executable, str(tmp_path / "driver.py"), str(skip_quick)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        started.append(proc)
        return proc

    yield start, tmp_path
    for proc in started:  # never leave a batch behind, whatever the test did
        if proc.poll() is None:
            proc.kill()


def wait_for(path, proc, timeout_s=120):
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert proc.poll() is None, proc.stdout.read()
        assert time.monotonic() < deadline, "the sleeper notebook never started"
        time.sleep(0.2)


def gone(proc: psutil.Process) -> bool:
    try:
        return not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.slow
@pytest.mark.parametrize("signum, skip_quick", [(signal.SIGINT, 0), (signal.SIGTERM, 1)])
def test_signal_stops_the_notebook_tree_and_the_next_run_resumes(batch, signum, skip_quick):
    start, tmp = batch
    proc = start(skip_quick)
    wait_for(tmp / "mark", proc)
    kernel_pid, grandchild_pid = map(int, (tmp / "mark").read_text().split())
    tree = psutil.Process(proc.pid).children(recursive=True)
    pids = {p.pid for p in tree}
    # the kernel is a descendant, in a session of its own
    assert {kernel_pid, grandchild_pid} <= pids
    assert os.getsid(kernel_pid) != os.getsid(proc.pid)
    os.killpg(proc.pid, signum)  # Ctrl-C reaches the foreground process group: the batch
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signum, output
    assert "Traceback" not in output and "interrupted by" in output
    assert all(gone(p) for p in tree), [p for p in tree if not gone(p)]

    state = read_state(tmp / "outputs")
    assert state["jobs"]["sleeper"]["status"] == "interrupted"
    assert state["runs"][-1]["status"] == "interrupted"
    json.loads((tmp / "outputs" / "state.json").read_text())
    if skip_quick:
        return
    assert state["jobs"]["quick"]["status"] == "ok"
    (tmp / "flag").unlink()
    again = start(0)
    output, _ = again.communicate(timeout=180)
    assert again.returncode == 0, output
    assert "quick (reused)" in output and "ok  sleeper" in output
