"""Batches on a real Dask cluster of worker processes on this machine.

Workers declare their hardware as resources; a timed job goes to a worker offering its hardware;
the executed notebook, HTML and JSON come back into outputs/runs/<id>/; a worker killed mid-job
has its job re-run elsewhere and the record says so.
"""

import _thread
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import pytest

from kit.batch import Job
from kit.batch.dask_executor import TOPIC, DaskExecutor
from kit.batch.interrupts import BatchInterrupted
from kit.batch.runner import run_jobs
from kit.batch.state import read_state
from kit.hardware.reuse import reuse_identity
from tests.batch_notebooks import make_notebook, make_ok_notebook

distributed = pytest.importorskip("distributed")

SUMMARY = """
import json
from pathlib import Path
seen = [json.loads((Path(outputs) / f).read_text())["device"] for f in result_files
        if (Path(outputs) / f).exists()]
Path(results_path).write_text(json.dumps({"status": "ok", "errors": [], "seen": seen}))
"""

MARK_KERNEL = """
import os
from pathlib import Path
with open(os.environ["KERNEL_MARKS"], "a") as marks:
    marks.write(f"{os.getpid()}\\n")
import time; time.sleep(seconds)
"""


ENVIRON = dict(os.environ)  # before any nanny adds its thread limits to this process's


@contextlib.contextmanager
def cluster(**workers):
    """A cluster of one worker process per keyword: name=resources, one thread each."""
    from distributed import Nanny, Scheduler, SpecCluster

    spec = {
        name: {"cls": Nanny, "options": {"nthreads": 1, "resources": resources}}
        for name, resources in workers.items()
    }
    try:
        with SpecCluster(
            scheduler={"cls": Scheduler, "options": {"dashboard_address": None}},
            workers=spec,
            silence_logs=40,
        ) as c:
            yield c
    finally:  # a nanny sets OMP_NUM_THREADS=1 and more in the process that starts it
        os.environ.clear()
        os.environ.update(ENVIRON)


@pytest.fixture
def notebooks(tmp_path, monkeypatch):
    folder = tmp_path / "notebooks"
    folder.mkdir()
    make_ok_notebook(folder / "tiny.ipynb")
    make_ok_notebook(folder / "marked.ipynb", "seconds = 0", before=MARK_KERNEL)
    make_notebook(folder / "summary.ipynb", SUMMARY, "result_files = []\noutputs = ''")
    monkeypatch.setenv("KIT_NOTEBOOKS", str(folder))
    monkeypatch.setenv("KERNEL_MARKS", str(tmp_path / "kernels"))
    return folder


@pytest.mark.slow
def test_jobs_go_to_workers_with_their_hardware_and_outputs_come_back(outputs, notebooks):
    from distributed import Client

    jobs = lambda: [  # noqa: E731
        Job("on_cpu", "tiny.ipynb", {"device": "cpu"}),
        Job("on_ipu", "tiny.ipynb", {"device": "ipu"}),
        Job("on_gpu", "tiny.ipynb", {"device": "cuda"}),
        Job("summary", "summary.ipynb", {"outputs": str(outputs)}, after_all=True),
    ]
    with cluster(**{"cpu-host": {"cpu": 1}, "ipu-host": {"ipu": 1}}) as c, Client(c) as client:
        first = {r.name: r for r in run_jobs(jobs(), out=outputs, executor=DaskExecutor(client))}
        second = {r.name: r for r in run_jobs(jobs(), out=outputs, executor=DaskExecutor(client))}
        local_pids = {p.pid for p in psutil.Process().children(recursive=True)}
        interrupted, kernels = interrupt_a_running_job(
            client, outputs, notebooks.parent / "kernels"
        )

    assert first["on_cpu"].status == first["on_ipu"].status == "ok"
    assert first["on_cpu"].worker == "cpu-host" and first["on_ipu"].worker == "ipu-host"
    assert first["on_cpu"].host == first["on_ipu"].host == socket.gethostname()
    assert first["on_gpu"].status == "failed"
    assert (
        "no worker of this cluster offers 'cuda' (workers offer: cpu, ipu)"
        in first["on_gpu"].message
    )
    for name in ("on_cpu", "on_ipu"):
        record = first[name]
        assert (outputs / record.html).exists() and (outputs / record.notebook_out).exists()
        data = json.loads((outputs / record.results).read_text())
        assert data["device"] == record.name[3:].replace("gpu", "cuda")
        assert data["pid"] not in local_pids  # the kernel ran under a worker, not the batch
        assert data["omp_threads"] == ENVIRON.get("OMP_NUM_THREADS")  # not Dask's limit of 1
    # the scorecard-like job ran here, on the results that came back
    assert first["summary"].worker == "" and first["summary"].status == "ok"
    assert json.loads((outputs / first["summary"].results).read_text())["seen"] == ["cpu", "ipu"]
    # resume across the cluster: unchanged jobs are reused, the failure is tried again
    assert second["on_cpu"].reused and second["on_ipu"].reused
    assert not second["on_gpu"].reused and not second["summary"].reused  # its inputs changed
    # Ctrl-C: the running job is told to stop, its kernel on the worker goes, the state is valid
    assert interrupted.signum == signal.SIGINT
    assert [(r.name, r.status) for r in interrupted.records] == [
        ("on_cpu", "ok"),
        ("sleeper", "interrupted"),
    ]
    assert read_state(outputs)["runs"][-1]["status"] == "interrupted"
    assert kernels and all(not psutil.pid_exists(pid) for pid in kernels)


def interrupt_a_running_job(client, outputs, marks):
    """SIGINT this process while a long job runs on a worker; returns the exception and the
    kernel pids (after giving the worker a few seconds to stop them)."""
    jobs = [
        Job("on_cpu", "tiny.ipynb", {"device": "cpu"}),
        Job("sleeper", "marked.ipynb", {"device": "cpu", "seconds": 120}),
    ]

    batch_over = threading.Event()

    def interrupt_once_started() -> None:
        deadline = time.monotonic() + 120
        while not marks.exists() and time.monotonic() < deadline and not batch_over.is_set():
            time.sleep(0.2)
        if not batch_over.is_set():
            # a SIGINT after the batch would stop pytest's worker, not the batch
            # Ctrl-C as the main thread's Python handler sees it. A real SIGINT to this process,
            # once OpenVINO's AMX tests had run in it (tests grouped by floor run them first),
            # crashed it in the dynamic linker's lazy binding inside CPython's C signal handler
            # (SIGSEGV in _dl_runtime_resolve_xsavec, gdb), not a path of the kit's.
            _thread.interrupt_main(signal.SIGINT)

    threading.Thread(target=interrupt_once_started, daemon=True).start()
    try:
        with pytest.raises(BatchInterrupted) as caught:
            run_jobs(jobs, out=outputs, executor=DaskExecutor(client))
    finally:
        batch_over.set()
    kernels = [int(pid) for pid in marks.read_text().split()] if marks.exists() else []
    deadline = time.monotonic() + 15
    while any(psutil.pid_exists(pid) for pid in kernels) and time.monotonic() < deadline:
        time.sleep(0.2)
    return caught.value, kernels


@pytest.mark.slow
def test_a_worker_lost_mid_job_has_its_job_run_elsewhere(outputs, notebooks, tmp_path):
    from distributed import Client

    jobs = [Job(f"job{i}", "marked.ipynb", {"seconds": 3}) for i in range(2)]
    killed = {}
    with cluster(w1={"cpu": 1}, w2={"cpu": 1}) as c, Client(c) as client:
        client.wait_for_workers(2)
        pids = client.run(os.getpid)

        def kill_the_first_worker_to_start() -> None:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                started = [m for _, m in client.get_events(TOPIC) if m["event"] == "started"]
                if started:
                    time.sleep(1)  # the job is under way
                    killed.update(started[0])
                    c.workers[killed["name"]].close_gracefully()  # its nanny must not restart it
                    os.kill(pids[started[0]["worker"]], signal.SIGKILL)
                    return
                time.sleep(0.2)

        killer = threading.Thread(target=kill_the_first_worker_to_start, daemon=True)
        killer.start()
        records = {r.name: r for r in run_jobs(jobs, out=outputs, executor=DaskExecutor(client))}
        killer.join()

    assert killed, "no job started"
    assert all(r.status == "ok" for r in records.values()), records
    lost = records[killed["key"].rsplit("-", 1)[-1]]
    other = next(r for r in records.values() if r is not lost)
    assert lost.attempts == 2 and lost.worker == other.worker != killed["name"]  # re-run elsewhere
    assert (
        lost.note.startswith("worker lost mid-job; re-run from the start")
        and killed["name"] in lost.note
    )
    assert other.attempts == 1 and not other.note
    assert (outputs / lost.html).exists() and json.loads((outputs / lost.results).read_text())[
        "status"
    ] == "ok"
    # the first attempt's kernel did not outlive its worker
    first_kernel = int((tmp_path / "kernels").read_text().split()[0])
    deadline = time.monotonic() + 10
    while psutil.pid_exists(first_kernel) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert (
        not psutil.pid_exists(first_kernel)
        or psutil.Process(first_kernel).status() == psutil.STATUS_ZOMBIE
    )


@contextlib.contextmanager
def listener(answer: bytes | None):
    """A TCP server on 127.0.0.1 that accepts and then sends `answer` (None: never answers)."""
    server = socket.create_server(("127.0.0.1", 0))
    held = []

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            held.append(conn)
            if answer is not None:
                conn.recv(1024)
                conn.sendall(answer)

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"tcp://127.0.0.1:{server.getsockname()[1]}"
    finally:
        server.close()
        for conn in held:
            conn.close()


@pytest.mark.parametrize(
    "answer, expected",
    [
        (None, "accepted a connection but sent no Dask handshake within 3 s"),
        (
            b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n" * 3,
            "answered, but not as a Dask scheduler",
        ),
    ],
)
def test_a_scheduler_address_that_hangs_or_is_not_dask_is_a_named_error(answer, expected):
    from kit.errors import BackendUnavailable

    with listener(answer) as address:
        started = time.monotonic()
        with pytest.raises(BackendUnavailable) as caught:
            DaskExecutor(address, connect_timeout_s=1)
        assert time.monotonic() - started < 15
    message = str(caught.value)
    assert expected in message and address in message and "\n" not in message
    assert "dask scheduler" in message  # what to do


def test_kit_reproduce_names_an_unreachable_scheduler_with_exit_2(outputs, capsys):
    from kit.cli.main import main as kit_main

    with listener(None) as address:
        pass  # closed: nothing listens there now
    assert kit_main(["reproduce", "--scheduler", address, "--hardware", "cpu"]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        err.startswith(f"error: cannot reach the Dask scheduler at {address!r}") and "\n" not in err
    )


@contextlib.contextmanager
def worker_without_the_kit(scheduler: str):
    """A `dask worker` process (no nanny) in which `import kit` fails, as on a host whose
    environment lacks the kit; yields its process."""
    code = (
        "import sys; sys.modules['kit'] = None; "
        f"sys.argv = ['dask-worker', {scheduler!r}, '--nthreads', '1', '--no-nanny', "
        "'--resources', 'cpu=1', '--name', 'no-kit']; "
        "from distributed.cli.dask_worker import main; main()"
    )
    env = {k: v for k, v in ENVIRON.items() if k != "PYTHONPATH"}
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd="/",
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait(timeout=30)


@pytest.mark.slow
def test_a_worker_that_cannot_import_the_kit_fails_its_jobs_with_the_reason(outputs, notebooks):
    from distributed import Client, LocalCluster

    with (
        LocalCluster(n_workers=0, dashboard_address=None, silence_logs=40) as c,
        Client(c) as client,
        worker_without_the_kit(c.scheduler_address),
    ):
        client.wait_for_workers(1, timeout=60)
        started = time.monotonic()
        (record,) = run_jobs(
            [Job("on_cpu", "tiny.ipynb", {"device": "cpu"})],
            out=outputs,
            executor=DaskExecutor(client, lost_after_s=5),
        )
        assert time.monotonic() - started < 60
    assert record.status == "failed"
    assert (
        record.message.startswith("worker tcp://127.0.0.1:")
        and "cannot import the kit (ModuleNotFoundError" in record.message
    )
    assert "make install" in record.message


@pytest.mark.slow
def test_a_batch_whose_only_worker_dies_stops_waiting_and_says_why(
    outputs, notebooks, tmp_path, monkeypatch
):
    from distributed import Client

    # where the job's kernel makes its socket files (short: a socket path has 107 bytes)
    sockets = Path(tempfile.mkdtemp(prefix="kit-sock-", dir="/tmp"))
    monkeypatch.setenv("TMPDIR", str(sockets))
    with cluster(only={"cpu": 1}) as c, Client(c) as client:
        client.wait_for_workers(1)
        pids = client.run(os.getpid)

        def kill_the_worker_and_its_nanny_once_started() -> None:
            deadline = time.monotonic() + 120
            while not (tmp_path / "kernels").exists() and time.monotonic() < deadline:
                time.sleep(0.2)
            c.workers["only"].close_gracefully()  # the nanny goes: nothing restarts the worker
            for pid in pids.values():
                os.kill(pid, signal.SIGKILL)

        executor = DaskExecutor(client, lost_after_s=3)
        # the reuse fingerprint's hardware part comes from the workers offering the kind
        assert (
            executor.hardware_parts("cpu") == [reuse_identity("cpu")]
            and executor.hardware_parts("ipu") == []
        )
        threading.Thread(target=kill_the_worker_and_its_nanny_once_started, daemon=True).start()
        started = time.monotonic()
        records = run_jobs(
            [Job("sleeper", "marked.ipynb", {"device": "cpu", "seconds": 120})],
            out=outputs,
            executor=executor,
        )
        assert time.monotonic() - started < 90
    (record,) = records
    assert record.status == "failed"
    assert record.message.startswith(
        f"no worker offering 'cpu' was connected to the Dask scheduler at "
        f"{c.scheduler_address} for 3 s"
    )
    assert read_state(outputs)["runs"][-1]["status"] == "complete"
    # the job's worker, its parent gone, killed its kernel and removed the kernel's socket files
    deadline = time.monotonic() + 15
    while list(sockets.glob("kit-kernel-*")) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not list(sockets.glob("kit-kernel-*"))
    shutil.rmtree(sockets, ignore_errors=True)
