"""The five notebooks driven the way JupyterLab drives them: a live `jupyter server` from the
project's venv, one session per notebook with the ipu-repro kernel created through the REST API,
every cell executed over the kernel's websocket with small parameters injected after the
parameters cell. Then the server is stopped and no process of it is left.

Skips (saying why) only where a loopback port cannot be opened.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
import pytest

from tests.cli.test_notebooks import CASES
from tests.conftest import ROOT

KERNEL = "ipu-repro"
CELL_TIMEOUT_S = 240
STUDIES = ("model_benchmark", "c2_study", "server_scenario")
PARALLEL = int(os.environ.get("LIVE_SERVER_PARALLEL", "3"))


def loopback_port() -> int:
    try:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]
    except OSError as exc:
        pytest.skip(f"cannot open a loopback port here ({exc}): no live Jupyter server possible")


class LiveServer:
    """A `jupyter server` subprocess and a small client for its REST API."""

    def __init__(self, tmp: Path):
        self.port, self.token = loopback_port(), uuid.uuid4().hex
        self.outputs = tmp / "outputs"
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
            "KIT_OUTPUTS": str(self.outputs),
            "KIT_CACHE": str(ROOT / "outputs" / "cache"),
            "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"),
        }
        for name in ("KIT_BATCH", "KIT_PROGRESS"):  # run as a researcher would: progress on
            env.pop(name, None)
        cmd = [
            sys.executable,
            "-m",
            "jupyter",
            "server",
            f"--ServerApp.port={self.port}",
            "--ServerApp.ip=127.0.0.1",
            "--ServerApp.port_retries=0",
            "--ServerApp.open_browser=False",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={ROOT / 'notebooks'}",
        ]
        if os.geteuid() == 0:
            cmd.append("--allow-root")
        self.log = (tmp / "server.log").open("w")
        self.proc = subprocess.Popen(
            cmd,
            env=env,
            cwd=ROOT,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.base = f"http://127.0.0.1:{self.port}"
        self.seen: dict[int, psutil.Process] = {}  # every process of the server met while running
        deadline = time.monotonic() + 60
        while True:
            try:
                self.api("GET", "/api/status")
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    pytest.fail(
                        f"jupyter server did not start: {(tmp / 'server.log').read_text()[-2000:]}"
                    )
                time.sleep(0.3)

    def api(self, method: str, path: str, body: dict | None = None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            self.base + path,
            data=data,
            method=method,
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=30) as r:
            raw = r.read()
        return json.loads(raw) if raw else None

    def processes(self) -> list[psutil.Process]:
        try:
            root = psutil.Process(self.proc.pid)
            return [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def stop(self) -> list[psutil.Process]:
        """Shut the server down through its API (it stops its kernels); returns what was running."""
        running = self.processes()
        try:
            self.api("POST", "/api/shutdown")
        except OSError:
            self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        finally:
            self.log.close()
        return running


class KernelChannel:
    """The kernel's websocket (Jupyter's JSON message protocol, as JupyterLab speaks it)."""

    def __init__(self, server: LiveServer, kernel_id: str):
        import websocket

        self.session = uuid.uuid4().hex
        self.ws = websocket.create_connection(
            f"ws://127.0.0.1:{server.port}/api/kernels/{kernel_id}/channels?session_id="
            f"{self.session}",
            header=[f"Authorization: token {server.token}"],
            timeout=CELL_TIMEOUT_S,
        )

    def execute(self, code: str) -> tuple[list[dict], dict]:
        """Run one cell; its outputs (as nbformat output dicts) and the execute_reply content."""
        msg_id = uuid.uuid4().hex
        self.ws.send(
            json.dumps(
                {
                    "header": {
                        "msg_id": msg_id,
                        "msg_type": "execute_request",
                        "username": "test",
                        "session": self.session,
                        "version": "5.3",
                        "date": dt.datetime.now(dt.UTC).isoformat(),
                    },
                    "parent_header": {},
                    "metadata": {},
                    "channel": "shell",
                    "buffers": [],
                    "content": {
                        "code": code,
                        "silent": False,
                        "store_history": True,
                        "user_expressions": {},
                        "allow_stdin": False,
                        "stop_on_error": True,
                    },
                }
            )
        )
        outputs, reply, idle = [], None, False
        deadline = time.monotonic() + CELL_TIMEOUT_S
        while not (idle and reply is not None):
            if time.monotonic() > deadline:
                raise TimeoutError(f"cell did not finish in {CELL_TIMEOUT_S} s: {code[:80]!r}")
            raw = self.ws.recv()
            if isinstance(raw, bytes):  # a message with binary buffers (widgets); not an output
                continue
            msg = json.loads(raw)
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "execute_reply":
                reply = content
            elif kind == "status" and content["execution_state"] == "idle":
                idle = True
            elif kind in ("stream", "display_data", "execute_result", "error"):
                outputs.append({"output_type": kind, **content})
        return outputs, reply

    def close(self) -> None:
        self.ws.close()


def injected(params: dict) -> str:
    return "# Parameters injected by the test (as papermill would)\n" + "\n".join(
        f"{k} = {v!r}" for k, v in params.items()
    )


def run_notebook(server: LiveServer, name: str, params: dict) -> list[dict]:
    path = f"{name}.ipynb"
    session = server.api(
        "POST",
        "/api/sessions",
        {"path": path, "name": path, "type": "notebook", "kernel": {"name": KERNEL}},
    )
    assert session["kernel"]["name"] == KERNEL
    server.seen.update({p.pid: p for p in server.processes()})
    nb = server.api("GET", f"/api/contents/{path}?type=notebook&content=1")["content"]
    cells = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert "parameters" in cells[0]["metadata"].get("tags", [])
    sources = [
        "".join(cells[0]["source"]),
        injected(params),
        *("".join(c["source"]) for c in cells[1:]),
    ]
    channel = KernelChannel(server, session["kernel"]["id"])
    shown: list[dict] = []
    try:
        for source in sources:
            outputs, reply = channel.execute(source)
            errors = [o for o in outputs if o["output_type"] == "error"]
            assert reply["status"] == "ok" and not errors, (name, source, errors or reply)
            shown += outputs
    finally:
        channel.close()
        server.api("DELETE", f"/api/sessions/{session['id']}")
    return shown


@pytest.fixture
def server(tmp_path):
    live = LiveServer(tmp_path)
    try:
        yield live
    finally:
        if live.proc.poll() is None:
            live.stop()


def test_every_notebook_through_a_live_jupyter_server(server):
    started = time.perf_counter()
    with ThreadPoolExecutor(PARALLEL) as pool:  # sessions side by side, as tabs in JupyterLab
        runs = {
            name: pool.submit(run_notebook, server, name, params)
            for name, (params, _) in CASES.items()
        }
    for name, (_, draws) in CASES.items():
        shown = runs[name].result()
        html = [o["data"]["text/html"] for o in shown if "text/html" in o.get("data", {})]
        assert any("<table" in h for h in html), f"{name}: no table shown"
        if draws:
            assert any("image/png" in o.get("data", {}) for o in shown), f"{name}: no plot drawn"
        if name in STUDIES:
            saved = sorted((server.outputs / "interactive").glob(f"{name}-*.json"))
            assert len(saved) == 1, saved
            data = json.loads(saved[0].read_text())
            assert data["status"] == "ok" and data["kind"] == name, data["errors"]
            assert any(str(saved[0]) in o.get("text", "") for o in shown), "saved path not printed"
            widgets = [
                o for o in shown if "application/vnd.jupyter.widget-view+json" in o.get("data", {})
            ]
            assert widgets, f"{name}: no progress bar shown"
    ran_s = time.perf_counter() - started
    server.seen.update({p.pid: p for p in server.stop()})
    kernels = [p for p in server.seen.values() if p.pid != server.proc.pid]
    assert len(kernels) >= len(CASES)  # one kernel per session, each a child of the server
    time.sleep(0.5)
    left = [
        p for p in server.seen.values() if p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    ]
    assert not left, f"orphan processes after shutdown: {[(p.pid, p.cmdline()[:3]) for p in left]}"
    group = [p for p in psutil.process_iter(["pid"]) if _pgid(p.pid) == server.proc.pid]
    assert not group, f"processes left in the server's process group: {group}"
    print(f"five notebooks through a live server in {ran_s:.1f} s")


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None
