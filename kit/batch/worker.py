"""Child process of the batch: execute one notebook with papermill, then render it to HTML.

`python -m kit.batch.worker SPEC_JSON`. The HTML is rendered even when a cell fails, so the
report shows the error. Exit status: 0 ran, 1 a cell failed, 3 the kernel died (the last line
then says "killed (likely out of memory: peak X GB)"). If the batch process that started it
disappears, it stops its kernel and exits instead of running on as an orphan.

`python -m kit.batch.worker --serve` (the warm mode, kit.batch.local.WarmWorker) reads one spec
per line on stdin and runs them one after another in one kernel kept warm between them
(WarmKernel): the same exit status per job, written with the kernel's pid to the spec's "reply"
file, and the same printed lines, in the spec's "log" file.
"""

from __future__ import annotations

import ast
import json
import os
import resource
import sys
import tempfile
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from jupyter_client import AsyncKernelManager
from jupyter_core.utils import run_sync
from traitlets import CaselessStrEnum, default

from kit import atomic
from kit.batch.proctree import kill_tree, tree
from kit.batch.render import notebook_to_html
from kit.hardware.source import JOB_ENV
from kit.measure.memory import GB, Peak, child_peak, oom_message

EXIT_FAILED = 1
EXIT_KILLED = 3

# nbformat's jsonschema probes the optional rfc3987_syntax package, whose import compiles a lark
# grammar: 1.4 s of every job on a 2-core machine. Notebook validation checks no IRI formats.
sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]  # None: "not installed"


class IpcKernelManager(AsyncKernelManager):
    """A kernel on Unix sockets of its own (transport ipc) instead of TCP ports: jupyter_client
    picks a free port by binding and closing it before the kernel binds it, and a kernel another
    process started in that moment (a second test worker, a JupyterLab) could take it: "Address
    already in use", the kernel died before its first reply and the notebook failed unrun."""

    transport = CaselessStrEnum(["tcp", "ipc"], default_value="ipc", config=True)

    @default("ip")
    def _own_socket_prefix(self) -> str:  # jupyter_client's default, "kernel-ipc", is shared
        return os.path.join(
            tempfile.gettempdir(), f"{KERNEL_SOCKETS}{os.getpid()}-{uuid.uuid4().hex}-ipc"
        )


KERNEL_SOCKETS = "kit-kernel-"  # + the pid of the worker whose kernel listens on them


def remove_kernel_sockets(pids: Iterable[int]) -> list[Path]:
    """Delete the socket files of kernels whose workers (`pids`) were killed before they could
    shut them down (a kernel shut down removes its own); returns what was deleted."""
    tmp = Path(tempfile.gettempdir())
    files = [f for pid in pids for f in tmp.glob(f"{KERNEL_SOCKETS}{pid}-*-ipc-*")]
    for f in files:
        f.unlink(missing_ok=True)
    return files


def children_peak() -> Peak:
    """Peak resident memory of the largest finished child (the kernel)."""
    kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return child_peak(kb * 1024 if sys.platform != "darwin" else kb)


def watch_parent(interval_s: float = 1.0) -> None:
    """Stop this process and its kernel once the batch that started it is gone."""
    parent = os.getppid()

    def poll() -> None:
        while os.getppid() == parent:
            time.sleep(interval_s)

        for child in tree(os.getpid())[1:]:
            kill_tree(child.pid, grace_s=1.0)
        remove_kernel_sockets([os.getpid()])  # its kernel, killed, could not
        os._exit(EXIT_KILLED)

    threading.Thread(target=poll, name="watch-parent", daemon=True).start()


def main(spec_json: str) -> int:
    spec = json.loads(spec_json)
    watch_parent()
    if spec.get("job"):  # the kernel inherits it: capture() records the job in the result
        os.environ[JOB_ENV] = json.dumps(spec["job"])
    return execute(spec, children_peak)


def execute(spec: dict, dead_peak: Callable[[], Peak], km: Any = None) -> int:
    """Execute the notebook (in `km`'s kernel where given, else a new one), render its HTML,
    return the exit status; the failure's line is printed last."""
    import papermill as pm
    from nbclient.exceptions import DeadKernelError

    code = 0
    try:
        pm.execute_notebook(
            spec["input"],
            spec["output"],
            parameters=spec["parameters"],
            kernel_name=spec["kernel"],
            cwd=spec["cwd"],
            progress_bar=False,
            log_output=False,
            km=km,
            kernel_manager_class=IpcKernelManager,  # where km is None: the kernel nbclient starts
        )
    except pm.PapermillExecutionError as exc:
        print(f"{exc.ename}: {exc.evalue}".splitlines()[0][:300])
        code = EXIT_FAILED
    except DeadKernelError:
        print(oom_message("killed: the notebook's kernel died", dead_peak()))
        code = EXIT_KILLED
    if Path(spec["output"]).exists():
        notebook_to_html(Path(spec["output"]), Path(spec["html"]))
    return code


# Run silently in the warm kernel before each job: a fresh namespace, cells counted from 1 again
# (the executed notebook as a fresh kernel numbers it), then kit.notebook.start_warm_job as a user
# expression, so no name is left in the namespace the notebook then runs in.
FRESH_CODE = "%reset -f\n__import__('IPython').get_ipython().execution_count = 1"
FRESH_JOB = "__import__('kit.notebook').notebook.start_warm_job({cwd!r}, {job!r})"


class WarmKernel:
    """The serve mode's one kernel, kept across jobs: started on the first job and again after it
    died, after a job whose cell failed (its half-done state, a sticky CUDA error), or where
    making it fresh failed."""

    def __init__(self, console: int) -> None:
        self.console = console  # where the kernel's own output goes: this worker's, not a job's
        self.km: Any = None
        self.clients: list = []  # what nbclient opened on it: closed after each job
        self.jobs = 0  # jobs this kernel has run
        self.children_before = 0  # ru_maxrss of the reaped children when the job started

    def run(self, spec: dict) -> dict:
        """Run one job in the kernel; the reply the parent reads (code, kernel, jobs, peak)."""
        fresh = run_sync(self._ready)(spec)
        self.jobs += 1
        self.children_before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        try:
            code = execute(spec, self._dead_peak, km=self.km)
        finally:
            for client in self.clients:
                client.stop_channels()
            self.clients.clear()
        reply = {"code": code, "kernel_pid": self.pid(), "job": self.jobs, **fresh}
        if code != 0:
            run_sync(self.discard)()
        return reply

    async def _ready(self, spec: dict) -> dict:
        """A live kernel, made fresh for `spec`'s job: {"peak_reset": bool}."""
        for _ in range(2):
            if (
                self.km is None
                or self.km.kernel_name != spec["kernel"]
                or not await self.km.is_alive()
            ):
                await self.discard()
                await self._start(spec)
            fresh = await self._fresh(spec)
            if fresh.get("cuda_ok"):
                return {"peak_reset": bool(fresh.get("peak_reset"))}
            await self.discard()
        raise RuntimeError(f"the warm kernel could not be made fresh for the job: {fresh}")

    async def _start(self, spec: dict) -> None:
        kernel = self

        class Manager(IpcKernelManager):
            def client(self, **kwargs: Any) -> Any:
                made = super().client(**kwargs)
                kernel.clients.append(made)
                return made

        # nbclient detects a dead kernel only with an asynchronous manager: a blocking client's
        # wait for a cell's reply leaves its liveness poll no turn
        self.km = Manager(kernel_name=spec["kernel"])
        await self.km.start_kernel(cwd=spec["cwd"], stdout=self.console, stderr=self.console)
        self.jobs = 0

    async def _fresh(self, spec: dict) -> dict:
        """FRESH_CODE, then kit.notebook.start_warm_job's answer ({} where it failed)."""
        client = self.km.client()
        self.clients.remove(client)
        client.start_channels()
        try:
            await client.wait_for_ready(timeout=60)
            expression = FRESH_JOB.format(cwd=spec["cwd"], job=spec.get("job"))
            reply = await client.execute_interactive(
                FRESH_CODE,
                silent=True,
                store_history=False,
                user_expressions={"fresh": expression},
                allow_stdin=False,
                timeout=120,
            )
        finally:
            client.stop_channels()
        answer = reply["content"].get("user_expressions", {}).get("fresh", {})
        if answer.get("status") != "ok":
            print(f"warm kernel: {answer.get('ename')}: {answer.get('evalue')}", file=sys.stderr)
            return {}
        return ast.literal_eval(answer["data"]["text/plain"])

    def pid(self) -> int | None:
        provisioner = getattr(self.km, "provisioner", None)
        return getattr(provisioner, "pid", None)

    def _dead_peak(self) -> Peak:
        """The dead kernel's peak: exact where it raised the reaped children's ru_maxrss, else at
        most what that was before the job."""
        after = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        if after > self.children_before:
            return children_peak()
        return Peak(None, self.children_before * 1024 / GB)

    async def discard(self) -> None:
        """Stop the kernel, and whatever it started, if there is one."""
        if self.km is None:
            return
        km, pid = self.km, self.pid()
        self.km = None
        self.clients.clear()
        if pid:
            kill_tree(pid, grace_s=1.0)
        try:  # its connection file and sockets; the process is gone
            await km.shutdown_kernel(now=True)
        except RuntimeError as exc:
            print(f"warm kernel: {exc}", file=sys.stderr)


def serve(lines: Iterable[str]) -> int:
    """`--serve`: each line a spec (with "log" and "reply" paths), run in the warm kernel."""
    watch_parent()
    kernel = WarmKernel(console=os.dup(1))
    try:
        for line in lines:
            if line.strip():
                serve_one(json.loads(line), kernel)
    finally:
        run_sync(kernel.discard)()
    return 0


def serve_one(spec: dict, kernel: WarmKernel) -> None:
    """One job: its printed lines to spec["log"] (as the one-shot child's output), then the reply
    written to spec["reply"] (atomically: the parent waits for the file)."""
    with _output_to(Path(spec["log"])):
        try:
            reply = kernel.run(spec)
        except Exception:  # noqa: BLE001 - the job fails, with the traceback, as a one-shot child
            traceback.print_exc()
            run_sync(kernel.discard)()
            reply = {"code": EXIT_FAILED, "kernel_pid": None, "job": None}
    atomic.write_text(Path(spec["reply"]), json.dumps(reply))


@contextmanager
def _output_to(log: Path) -> Iterator[None]:
    """This process's stdout and stderr (file descriptors 1 and 2) into `log` meanwhile."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    with open(log, "ab") as f:
        os.dup2(f.fileno(), 1)
        os.dup2(f.fileno(), 2)
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, old in zip((1, 2), saved, strict=True):
            os.dup2(old, fd)
            os.close(old)


if __name__ == "__main__":
    sys.exit(serve(sys.stdin) if sys.argv[1:] == ["--serve"] else main(sys.argv[1]))
