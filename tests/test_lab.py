"""`make lab` (kit/cli/lab.py): the command as a function of user, display and address, and a real
start of JupyterLab through `python -m kit.cli.lab` as the user running the tests."""

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

from kit.cli.lab import KERNEL, LabOptions, check_port_free, has_display, lab_command, tunnel_hint
from kit.errors import InvalidParameter
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


@pytest.mark.parametrize("env, platform, expected", [
    ({}, "linux", False),
    ({"DISPLAY": ":0"}, "linux", True),
    ({"WAYLAND_DISPLAY": "wayland-0"}, "linux", True),
    ({"DISPLAY": ":0", "SSH_CONNECTION": "10.0.0.2 5 10.0.0.1 22"}, "linux", False),
    ({}, "darwin", True),
])
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


def test_lab_starts_as_this_user_with_the_project_kernel(tmp_path):
    """The bug of issue 16: as root, `jupyter lab` refused to start. Here it starts as whoever
    runs the tests (root in CI containers), serves notebooks/ and defaults to ipu-repro."""
    port, token = free_port(), "t" + os.urandom(8).hex()
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env.update(JUPYTER_TOKEN=token, JUPYTER_RUNTIME_DIR=str(tmp_path / "rt"),
               PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, "-m", "kit.cli.lab", "--port", str(port)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
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
        assert specs["default"] == KERNEL
        assert KERNEL in specs["kernelspecs"]
        listed = {c["name"] for c in get_json(f"{base}/api/contents", token)["content"]}
        assert {"model_benchmark.ipynb", "c2_study.ipynb"} <= listed
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        out = proc.communicate(timeout=30)[0]
    assert "--allow-root" in out if os.geteuid() == 0 else "--allow-root" not in out
    assert "no browser is opened" in out and f"ssh -N -L {port}:localhost:{port}" in out
