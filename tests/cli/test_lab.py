"""`make lab` (kit/cli/lab.py): the command as a function of user, display and address, and a real
start of JupyterLab through `python -m kit.cli.lab` as the user running the tests."""

import io
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from kit.cli.lab import (
    KERNEL,
    LabOptions,
    check_port_free,
    has_display,
    jupyter_dirs,
    jupyter_moves,
    lab_command,
    tunnel_hint,
)
from kit.errors import InvalidParameter, KitError
from tests.conftest import ROOT


@pytest.mark.parametrize("uid, allow_root", [(0, True), (1000, False)])
def test_allow_root_only_for_root(uid, allow_root):
    cmd = lab_command(LabOptions(uid=uid, browser=True), bin_dir=Path("/v/bin"))
    assert ("--allow-root" in cmd) is allow_root
    assert cmd[:2] == ["/v/bin/jupyter", "lab"]
    assert f"--MappingKernelManager.default_kernel_name={KERNEL}" in cmd
    assert f"--ServerApp.root_dir={ROOT / 'notebooks'}" in cmd
    assert "--no-browser" not in cmd


def test_address_and_no_browser():
    cmd = lab_command(LabOptions(ip="0.0.0.0", port=9123, uid=1000, browser=False))
    assert {"--ip=0.0.0.0", "--port=9123", "--no-browser", "--ServerApp.port_retries=0"} <= set(cmd)


@pytest.mark.parametrize(
    "env, platform, expected",
    [
        ({}, "linux", False),
        ({"DISPLAY": ":0"}, "linux", True),
        ({"WAYLAND_DISPLAY": "wayland-0"}, "linux", True),
        ({"DISPLAY": ":0", "SSH_CONNECTION": "10.0.0.2 5 10.0.0.1 22"}, "linux", False),
        ({}, "darwin", True),
    ],
)
def test_display_detection(env, platform, expected):
    assert has_display(env, platform) is expected


def test_tunnel_hint_names_port_and_host():
    hint = tunnel_hint(LabOptions(port=9001, uid=1000, browser=False), user="ana", host="ipu-box")
    assert hint.startswith("ssh -N -L 9001:localhost:9001 ana@ipu-box")


@pytest.mark.parametrize("kwargs", [{"port": 0}, {"port": 70000}, {"ip": ""}])
def test_bad_address_is_named(kwargs):
    with pytest.raises(InvalidParameter, match="LAB_"):
        LabOptions(uid=1000, browser=False, **kwargs)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_busy_port_is_a_clear_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        with pytest.raises(InvalidParameter, match="LAB_PORT=8890"):
            check_port_free("127.0.0.1", s.getsockname()[1])


def get_json(url: str, token: str) -> dict:
    req = urllib.request.Request(url, headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(req, timeout=5) as r:
        return json.loads(r.read())


def start_lab(tmp_path, **env_changes) -> tuple[str, dict]:
    """Start `python -m kit.cli.lab` as the user running the tests, wait for its kernel specs,
    stop it; its output and the specs."""
    port, token = free_port(), "t" + os.urandom(8).hex()
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env.update(
        JUPYTER_TOKEN=token,
        PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]),
        **env_changes,
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "kit.cli.lab", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                specs = get_json(f"{base}/api/kernelspecs", token)
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"lab did not start: {proc.communicate(timeout=5)[0][-2000:]}")
                time.sleep(0.5)
        specs["contents"] = {c["name"] for c in get_json(f"{base}/api/contents", token)["content"]}
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        out = proc.communicate(timeout=30)[0]
    assert f"ssh -N -L {port}:localhost:{port}" in out
    return out, specs


def test_lab_starts_as_this_user_with_the_project_kernel(tmp_path):
    """The bug of issue 16: as root, `jupyter lab` refused to start. Here it starts as whoever
    runs the tests (root in CI containers), serves notebooks/ and defaults to ipu-repro."""
    out, specs = start_lab(tmp_path, JUPYTER_RUNTIME_DIR=str(tmp_path / "rt"))
    assert specs["default"] == KERNEL
    assert KERNEL in specs["kernelspecs"]
    assert {"model_benchmark.ipynb", "c2_study.ipynb"} <= specs["contents"]
    assert "--allow-root" in out if os.geteuid() == 0 else "--allow-root" not in out
    assert "no browser is opened" in out
    assert "cannot write" not in out


JUPYTER_VARIABLES = (
    "JUPYTER_RUNTIME_DIR",
    "JUPYTER_DATA_DIR",
    "JUPYTERLAB_SETTINGS_DIR",
    "JUPYTERLAB_WORKSPACES_DIR",
    "IPYTHONDIR",
)


@pytest.fixture
def unwritable_home(tmp_path, monkeypatch):
    """A HOME no one can write, root included: it lies under a regular file."""
    (tmp_path / "file").write_text("")
    home = tmp_path / "file" / "home"
    monkeypatch.setenv("HOME", str(home))
    for var in (
        *JUPYTER_VARIABLES,
        "JUPYTER_CONFIG_DIR",
        "XDG_DATA_HOME",
        "XDG_RUNTIME_DIR",
        "XDG_CONFIG_HOME",
    ):
        monkeypatch.delenv(var, raising=False)
    return home


def test_jupyter_folders_in_an_unwritable_home_move_to_a_scratch_folder(unwritable_home, tmp_path):
    """A read-only HOME gave 11 raw Jupyter tracebacks ('Read-only file system: .../.local')."""
    assert all(path.is_relative_to(unwritable_home) for path in jupyter_dirs().values())
    moved, note = jupyter_moves(scratch=lambda: tmp_path / "scratch")
    assert moved == {var: str(tmp_path / "scratch" / var.lower()) for var in JUPYTER_VARIABLES}
    assert note == (
        f"make lab: cannot write in HOME ({unwritable_home}): Jupyter writes its files under "
        f"{tmp_path / 'scratch'} instead (set {', '.join(JUPYTER_VARIABLES)} to choose)"
    )


def test_an_unwritable_folder_the_user_chose_is_an_error(unwritable_home, monkeypatch, tmp_path):
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(unwritable_home / "rt"))
    with pytest.raises(
        InvalidParameter,
        match=r"invalid JUPYTER_RUNTIME_DIR='.*/file/home/rt': a folder this user can write",
    ):
        jupyter_moves(scratch=lambda: tmp_path / "scratch")


def test_no_writable_folder_at_all_is_one_error_naming_the_variables(unwritable_home):
    def no_temp():
        raise OSError(30, "Read-only file system")

    with pytest.raises(
        KitError, match=r"nor a temporary folder \(Read-only file system\): set JUPYTER_RUNTIME_DIR"
    ):
        jupyter_moves(scratch=no_temp)


def test_the_scratch_folder_is_one_per_user_and_private(tmp_path, monkeypatch):
    """A new /tmp/kit-lab-XXXX was left behind at every start."""
    from kit.cli import lab

    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    first = lab.scratch_dir()
    assert first == tmp_path / f"kit-lab-{os.getuid()}" and lab.scratch_dir() == first
    assert first.stat().st_mode & 0o777 == 0o700
    first.chmod(0o777)  # a folder others can write is not used: a fresh private one instead
    other = lab.scratch_dir()
    assert other != first and other.parent == tmp_path and other.stat().st_mode & 0o077 == 0


def test_a_writable_home_moves_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for var in JUPYTER_VARIABLES:
        monkeypatch.delenv(var, raising=False)
    assert jupyter_moves(scratch=lambda: pytest.fail("no scratch folder needed")) == ({}, "")


def test_lab_starts_with_an_unwritable_home(tmp_path, unwritable_home):
    env = {var: "" for var in JUPYTER_VARIABLES} | {
        "HOME": str(unwritable_home),
        "TMPDIR": str(tmp_path),
    }
    out, specs = start_lab(tmp_path, **env)
    assert specs["default"] == KERNEL and "model_benchmark.ipynb" in specs["contents"]
    assert (
        f"make lab: cannot write in HOME ({unwritable_home}): Jupyter writes its files under "
        f"{tmp_path}/kit-lab-" in out
    )
    assert "Traceback" not in out, out[-3000:]


def test_the_lab_note_prints_in_an_ascii_locale(unwritable_home, monkeypatch, tmp_path):
    """A HOME beyond ASCII under LANG=C: the note comes out with look-alikes, not a traceback."""
    from kit.cli import lab

    monkeypatch.setenv("HOME", str(unwritable_home.parent / "hóme"))
    monkeypatch.setattr(lab, "scratch_dir", lambda: tmp_path / "scratch")
    started = []
    monkeypatch.setattr(lab.os, "execve", lambda path, argv, env: started.append(env))
    terminal = io.TextIOWrapper(io.BytesIO(), encoding="ascii")
    monkeypatch.setattr(sys, "stdout", terminal)
    assert lab.main(["--port", str(free_port())]) == 0
    terminal.flush()
    shown = terminal.buffer.getvalue().decode("ascii")
    assert (
        f"make lab: cannot write in HOME ({unwritable_home.parent}/home): Jupyter writes" in shown
    )
    assert started[0]["JUPYTER_RUNTIME_DIR"] == str(tmp_path / "scratch" / "jupyter_runtime_dir")
