"""`kit fetch-data` against a local HTTP server that stalls: a timeout, not a hang; and a killed
download's temporary folder is removed by the next fetch."""

import http.server
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from kit.datasets.fetch import TMP_PREFIX, fetch, remove_stale_downloads
from kit.errors import InvalidParameter, MissingResource

BODY = b"1," + b",".join([b"0"] * 39) + b"\n"


class Server:
    """Serves /eval.csv; /stall sends headers and a few bytes, then stalls until released."""

    def __init__(self):
        release = self.release = threading.Event()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - the http.server API
                self.send_response(200)
                stall = self.path == "/stall"
                self.send_header("Content-Length", str(10 * len(BODY) if stall else len(BODY)))
                self.end_headers()
                self.wfile.write(BODY[:5])
                self.wfile.flush()
                if stall:
                    release.wait(30)
                    return
                self.wfile.write(BODY[5:])

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = Server()
    yield s
    s.close()


def test_stalled_server_times_out_with_a_clear_error(tmp_path, server):
    dest = tmp_path / "criteo"
    start = time.monotonic()
    with pytest.raises(MissingResource, match="timed out") as err:
        fetch(
            "criteo",
            dest,
            url=f"{server.url}/stall",
            timeout=0.5,
            log=lambda _: None,
            accept_unpinned=True,
        )
    assert time.monotonic() - start < 10
    assert "by hand" in str(err.value)
    assert list(dest.iterdir()) == []  # the partial download went with its temporary folder


def test_bad_timeout_is_rejected(tmp_path):
    for bad in (0, -1, float("nan"), "5", True):
        with pytest.raises(InvalidParameter, match="timeout"):
            fetch("criteo", tmp_path, url="http://127.0.0.1:9/x", timeout=bad)


CHILD = """
import sys
from kit.datasets.fetch import fetch
fetch("criteo", sys.argv[1], url=sys.argv[2], timeout=60, log=lambda _: None, accept_unpinned=True)
"""


def test_killed_download_leaves_a_folder_the_next_fetch_removes(tmp_path, server):
    dest = tmp_path / "criteo"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(dest), f"{server.url}/stall"],
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    try:
        deadline = time.monotonic() + 60
        while not list(dest.glob(f"{TMP_PREFIX}*/eval.csv")) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert list(dest.glob(f"{TMP_PREFIX}{child.pid}-*")), "the child never started its download"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    assert list(dest.glob(f"{TMP_PREFIX}*"))  # a hard kill cannot clean up
    (dest / "tmpUserFolder").mkdir()  # not ours: left alone
    logs = []
    fetch("criteo", dest, url=f"{server.url}/eval.csv", log=logs.append, accept_unpinned=True)
    assert not list(dest.glob(f"{TMP_PREFIX}*")) and (dest / "tmpUserFolder").is_dir()
    assert any("interrupted download" in line for line in logs)
    assert (dest / "eval.csv").read_bytes() == BODY


def test_a_running_fetchs_folder_is_not_removed(tmp_path):
    mine = tmp_path / f"{TMP_PREFIX}{os.getppid()}-abc"  # a live process
    mine.mkdir()
    assert remove_stale_downloads(tmp_path, log=lambda _: None) == [] and mine.is_dir()
