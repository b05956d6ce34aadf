"""The warm mode: the model rows share one worker child and one kernel (kit.batch.worker --serve,
kit.batch.local.WarmWorker), each job as fresh as in a kernel of its own, and every failure,
death, time limit and stop handled as the one-shot child's are.

The model rows are a stand-in `model_benchmark.ipynb` (no model) whose `action` parameter says what
it does; beside its result it writes what it saw (`<result>.seen.json`).
"""

import json
import os
import shutil
import sys
import tempfile
from collections import OrderedDict
from dataclasses import replace
from pathlib import Path

import nbformat
import psutil
import pytest

from kit.batch import Job
from kit.batch.executor import Task
from kit.batch.jobs import WARM_NOTEBOOKS, JobRecord, check_warm_mode, runs_warm
from kit.batch.local import LocalExecutor, WarmWorker, _warm_outcome
from kit.batch.runner import run_jobs
from kit.batch.state import read_state
from kit.cli.main import main as kit_main
from kit.errors import InvalidParameter
from kit.hardware import kinds
from tests.batch_notebooks import make_ok_notebook

MODEL = "model_benchmark.ipynb"
assert MODEL in WARM_NOTEBOOKS

# What the stand-in row saw, then what it does: ok, raise (a cell fails), die (the kernel exits),
# sleep (past any time limit).
ROW = """
import json, os, time
from pathlib import Path
Path(results_path + ".seen.json").write_text(json.dumps({
    "pid": os.getpid(),
    "left_by_the_last_job": "left" in globals(),
    "env_left_by_the_last_job": os.environ.get("KIT_TEST_LEFT"),
    "job": json.loads(os.environ.get("KIT_JOB") or "null"),
}))
left = 1
os.environ["KIT_TEST_LEFT"] = results_path
if action == "raise":
    raise ValueError("the row failed on purpose")
if action == "die":
    os._exit(9)
if action == "sleep":
    time.sleep(300)
"""


@pytest.fixture
def rows(tmp_path, monkeypatch):
    """A notebooks folder with the stand-in model row and tiny.ipynb (another notebook)."""
    folder = tmp_path / "notebooks"
    folder.mkdir()
    make_ok_notebook(folder / MODEL, parameters="action = 'ok'\n", before=ROW)
    make_ok_notebook(folder / "tiny.ipynb")
    monkeypatch.setenv("KIT_NOTEBOOKS", str(folder))
    return folder


def row(name: str, action: str = "ok", timeout_s: int = 120) -> Job:
    return Job(name, MODEL, {"action": action}, timeout_s)


def seen(outputs, record) -> dict:
    return json.loads((outputs / f"{record.results}.seen.json").read_text())


def descendants() -> set[int]:
    """This test process's live children and theirs (zombies count as gone)."""
    alive = set()
    for proc in psutil.Process().children(recursive=True):
        try:
            if proc.status() != psutil.STATUS_ZOMBIE:
                alive.add(proc.pid)
        except psutil.NoSuchProcess:
            pass
    return alive


def test_model_rows_share_one_kernel_each_job_fresh_via_the_cli(outputs, rows, monkeypatch, capsys):
    jobs = [row("first"), row("second"), Job("other", "tiny.ipynb")]
    monkeypatch.setattr(
        "kit.cli.reproduce.jobs_for",
        lambda profile, hardware, research=False, search=True: [Job(**vars(j)) for j in jobs],
    )
    before = descendants()
    code = kit_main(["reproduce", "--hardware", "cpu", "--warm-kernel", "on"])
    out = capsys.readouterr().out
    assert code == 0, out
    state = read_state(outputs)["jobs"]
    first, second = (seen(outputs, _record(state, n)) for n in ("first", "second"))
    assert first["pid"] == second["pid"]  # one kernel served both
    assert not second["left_by_the_last_job"]  # %reset -f: the first one's names are gone
    assert second["env_left_by_the_last_job"] is None  # and its environment variables
    assert (first["job"]["name"], second["job"]["name"]) == ("first", "second")
    executed = nbformat.read(outputs / state["second"]["notebook_out"], as_version=4)
    counts = [c.execution_count for c in executed.cells if c.cell_type == "code"]
    assert counts == list(range(1, len(counts) + 1))  # numbered as in a kernel of its own
    other = json.loads((outputs / state["other"]["results"]).read_text())
    assert other["pid"] != first["pid"]  # every other notebook keeps a kernel of its own
    assert "warm kernel (its job 2)" in state["second"]["note"]
    assert "warm" not in state["other"]["note"]
    assert "--warm-kernel on" in second["job"]["batch_command"]
    assert descendants() <= before  # the warm worker and its kernel ended with the batch


# A notebook of another kind: which warm workers of the batch are alive while it runs (the batch
# process is its one-shot worker's parent).
SERVING = """
import json, os, psutil
from pathlib import Path
batch = psutil.Process(psutil.Process(os.getppid()).ppid())
serving = [c.pid for c in batch.children() if "--serve" in c.cmdline()]
Path(results_path + ".serving.json").write_text(json.dumps(serving))
"""


def test_the_warm_worker_ends_before_a_notebook_of_another_kind_runs(outputs, rows):
    """Its kernel would hold the last row's model (on a GPU its CUDA context and memory) beside
    the C2 study or the server scenario."""
    make_ok_notebook(rows / "probe.ipynb", before=SERVING)
    records = run_jobs([row("first"), Job("probe", "probe.ipynb")], out=outputs, warm="on")
    assert [r.status for r in records] == ["ok", "ok"]
    assert json.loads((outputs / f"{records[1].results}.serving.json").read_text()) == []


def _record(state: dict, name: str) -> JobRecord:
    return JobRecord.from_dict(state[name])


def test_a_failed_or_dead_row_is_reported_as_one_shot_and_the_next_row_runs(
    outputs, rows, monkeypatch
):
    # where the workers' kernels make their socket files (short: a socket path has 107 bytes)
    sockets = Path(tempfile.mkdtemp(prefix="kit-sock-", dir="/tmp"))
    monkeypatch.setenv("TMPDIR", str(sockets))
    jobs = [row("fails", "raise"), row("after_fail"), row("dies", "die"), row("after_death")]
    warm = {r.name: r for r in run_jobs(jobs, out=outputs, warm="on")}
    cold = {r.name: r for r in run_jobs(jobs[:3], out=outputs, warm="off", force=True)}
    for name in ("fails", "dies"):  # the same Outcome as a child of its own gives
        assert (warm[name].status, warm[name].message.split(" (")[0]) == (
            cold[name].status,
            cold[name].message.split(" (")[0],
        )
    assert warm["fails"].status == "failed"
    assert warm["fails"].message == "ValueError: the row failed on purpose"
    assert warm["dies"].status == "killed"
    assert warm["dies"].message.startswith("killed: the notebook's kernel died (")
    assert warm["after_fail"].status == warm["after_death"].status == "ok"
    dead = seen(outputs, warm["dies"])["pid"]
    assert seen(outputs, warm["after_death"])["pid"] != dead  # a fresh kernel after the death
    assert not psutil.pid_exists(dead) or psutil.Process(dead).status() == psutil.STATUS_ZOMBIE
    # a dead kernel leaves no socket files behind, warm or one-shot
    assert not list(sockets.glob("kit-kernel-*"))
    shutil.rmtree(sockets, ignore_errors=True)


def spec(rows, tmp_path, name: str, action: str) -> dict:
    out = tmp_path / "run"
    out.mkdir(exist_ok=True)
    return {
        "input": str(rows / MODEL),
        "output": str(out / f"{name}.ipynb"),
        "html": str(out / f"{name}.html"),
        "parameters": {"action": action, "results_path": str(out / f"{name}.json")},
        "kernel": "ipu-repro",
        "cwd": str(tmp_path),
        "job": {"name": name},
    }


def kernel_pid(tmp_path, name: str) -> int:
    return json.loads((tmp_path / "run" / f"{name}.json.seen.json").read_text())["pid"]


def test_a_timeout_kills_the_tree_and_the_next_row_starts_a_fresh_worker(outputs, rows, tmp_path):
    before = descendants()
    worker = WarmWorker(outputs)
    try:
        assert worker.run(spec(rows, tmp_path, "warm", "ok"), 120).status == "ok"
        serving = worker.proc.pid
        outcome = worker.run(spec(rows, tmp_path, "slow", "sleep"), 8)
        assert outcome.status == "timeout" and outcome.message == "timed out after 8 s"
        assert descendants() <= before  # the worker and its kernel (asleep in a cell) killed
        assert worker.run(spec(rows, tmp_path, "next", "ok"), 120).status == "ok"
        assert worker.proc.pid != serving
        assert kernel_pid(tmp_path, "next") != kernel_pid(tmp_path, "slow")
    finally:
        worker.kill()
    assert descendants() <= before


def test_a_stop_kills_the_tree(outputs, rows, tmp_path):
    before = descendants()
    worker = WarmWorker(outputs)
    try:

        def should_stop() -> bool:  # asked once a second: stop once the row is asleep
            return (tmp_path / "run" / "asleep.json.seen.json").exists()

        outcome = worker.run(spec(rows, tmp_path, "asleep", "sleep"), 120, should_stop)
        assert outcome.status == "interrupted" and outcome.message == "stopped by the batch"
        assert descendants() <= before
    finally:
        worker.kill()


def test_an_interrupt_while_a_row_runs_kills_the_tree_and_propagates(outputs, rows, tmp_path):
    before = descendants()
    worker = WarmWorker(outputs)

    def interrupted() -> bool:  # Ctrl-C (BatchInterrupted) arrives while the row sleeps
        if (tmp_path / "run" / "asleep.json.seen.json").exists():
            raise KeyboardInterrupt
        return False

    try:
        with pytest.raises(KeyboardInterrupt):
            worker.run(spec(rows, tmp_path, "asleep", "sleep"), 120, interrupted)
        assert worker.proc is None and descendants() <= before
    finally:
        worker.kill()


@pytest.mark.parametrize("end", ["stop", "close"])
def test_stop_and_close_leave_no_worker_nor_kernel(outputs, rows, tmp_path, end):
    before = descendants()
    executor = LocalExecutor(warm="on")
    task = Task(job=row("waits"), run_dir=outputs, out=outputs, fingerprint="")
    try:
        ran, outcome = next(executor.run([task, task]))  # the second not started yet
        assert outcome.status == "ok" and "warm kernel" in outcome.note
        assert descendants() - before  # the worker waits, warm, for the next row
        getattr(executor, end)()
        assert descendants() <= before
    finally:
        executor.stop()


def test_warm_kernel_values_and_auto_follow_the_kind(monkeypatch, capsys):
    with pytest.raises(SystemExit) as exit_:
        kit_main(["reproduce", "--warm-kernel", "bogus"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "--warm-kernel: invalid choice: 'bogus'" in err and "'auto', 'on', 'off'" in err
    with pytest.raises(InvalidParameter, match="'bogus'.*one of auto, on, off"):
        LocalExecutor(warm="bogus")
    with pytest.raises(InvalidParameter, match="'yes'.*one of auto, on, off"):
        check_warm_mode("yes")

    assert kinds.CUDA.warm_kernel and not kinds.CPU.warm_kernel
    for kind in (kinds.CPU, kinds.CUDA, kinds.IPU):
        model_row = Job("row", MODEL, {"hardware": kind.name})
        assert runs_warm(model_row, "auto") is kind.warm_kernel
        assert runs_warm(model_row, "on") and not runs_warm(model_row, "off")
        other = Job("other", "c2.ipynb", {"hardware": kind.name})
        assert not runs_warm(other, "on")  # only the model rows ever run warm
    # auto reads the kind's field, whatever the kind is called
    monkeypatch.setitem(kinds.REGISTRY._items, "cpu", replace(kinds.CPU, warm_kernel=True))
    assert runs_warm(Job("row", MODEL, {"hardware": "cpu"}), "auto")


def test_a_warm_job_forgets_what_the_last_one_left_in_the_kit(monkeypatch):
    """kit.notebook.forget_previous_job (run in the warm kernel before each job): the built torch
    model, the reference outputs, PopRT's availability and the GCDA_MONITOR record go."""
    from kit.backends import reference_outputs, torch_backend
    from kit.backends.ipu import backend as ipu_backend
    from kit.measure.power import ipu as ipu_power
    from kit.notebook import forget_previous_job

    cleared = []
    monkeypatch.setattr(torch_backend.built_module, "cache_clear", lambda: cleared.append(1))
    monkeypatch.setattr(reference_outputs, "_OUTPUTS", OrderedDict({("export", 4): []}))
    monkeypatch.setattr(ipu_backend, "_AVAILABILITY", {("python3.8",): None})
    monkeypatch.setattr(ipu_power, "_monitoring_record", ["GCDA_MONITOR=1 set"])
    forget_previous_job()
    assert cleared == [1]
    assert not reference_outputs._OUTPUTS and not ipu_backend._AVAILABILITY
    assert not ipu_power._monitoring_record


def test_a_sticky_cuda_error_asks_for_a_new_kernel(monkeypatch):
    """start_warm_job answers cuda_ok False where CUDA, initialised by the last job, fails now:
    the warm worker then starts a new kernel rather than fail every later row."""
    from types import SimpleNamespace

    from kit import notebook

    def fails() -> None:
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    cuda = SimpleNamespace(is_initialized=lambda: True, synchronize=fails, empty_cache=lambda: None)
    monkeypatch.setitem(sys.modules, "torch", SimpleNamespace(cuda=cuda))
    assert notebook._release_cuda_memory() is False
    cuda.synchronize = lambda: None
    assert notebook._release_cuda_memory() is True


def test_the_note_says_when_the_peak_counts_from_the_kernel_s_start():
    taken = _warm_outcome({"code": 0, "job": 3, "peak_reset": True}, [], 1.0)
    assert taken.note == "in the warm kernel (its job 3)"
    refused = _warm_outcome({"code": 0, "job": 3, "peak_reset": False}, [], 1.0)
    assert "peak memory since that kernel started" in refused.note
    failed = _warm_outcome({"code": 1, "job": None}, ["RuntimeError: no kernel"], 1.0)
    assert (failed.status, failed.message) == ("failed", "RuntimeError: no kernel")


@pytest.mark.slow
def test_the_real_model_rows_run_warm_and_say_so_in_their_results(outputs, tmp_path, monkeypatch):
    """The project's model_benchmark.ipynb (a small ResNet-50, ONNX Runtime then torch) in one
    warm kernel: each result records its own job and that it ran in a warm kernel."""
    monkeypatch.delenv("KIT_NOTEBOOKS", raising=False)
    small = {"model": "resnet50-torch-fp32", "small": True, "warmup": 1, "min_duration_s": 0.05}
    small |= {"min_count": 3, "target_ci": 0.0}
    jobs = [
        Job("ort", MODEL, {**small, "batch_sizes": [1]}, 300),
        Job("torch", MODEL, {**small, "batch_sizes": [2], "backend": "torch"}, 300),
    ]
    records = run_jobs(jobs, out=outputs, warm="on")
    for record, job in zip(records, jobs, strict=True):
        assert record.status == "ok", record.message
        assert record.note.startswith("in the warm kernel")
        result = json.loads((outputs / record.results).read_text())
        assert result["environment"]["job"]["name"] == job.name
        assert "in a kernel kept warm" in result["resources"]["method"]


def test_a_warm_job_finds_the_process_settings_the_kernel_started_with(monkeypatch, tmp_path):
    """What a notebook may change for the whole process comes back before the next job: the
    warning filters, the root logger's level, numpy's error handling, the environment;
    torch.compile's graphs and recompile counts are dropped."""
    import logging
    import os
    import warnings
    from types import SimpleNamespace

    import numpy as np

    from kit import notebook

    monkeypatch.setattr(notebook, "_KERNEL_START", {})
    monkeypatch.setattr(notebook, "start_warm_peaks", lambda: True)
    monkeypatch.chdir(tmp_path)
    resets = []
    dynamo = SimpleNamespace(reset=lambda: resets.append(1))
    monkeypatch.setitem(sys.modules, "torch._dynamo", dynamo)
    root = logging.getLogger()
    saved = (list(warnings.filters), root.level, np.geterr(), dict(os.environ))
    try:
        notebook.start_warm_job(str(tmp_path), {"name": "first"})
        warnings.simplefilter("ignore")
        root.setLevel(logging.CRITICAL)
        np.seterr(all="raise")
        os.environ["KIT_TEST_LEFT"] = "1"
        notebook.start_warm_job(str(tmp_path), {"name": "second"})
        assert list(warnings.filters) == saved[0]
        assert root.level == saved[1] and np.geterr() == saved[2]
        assert "KIT_TEST_LEFT" not in os.environ
        assert json.loads(os.environ["KIT_JOB"])["name"] == "second"
        assert resets == [1, 1]
    finally:
        warnings.filters[:] = saved[0]
        root.setLevel(saved[1])
        np.seterr(**saved[2])
        os.environ.clear()
        os.environ.update(saved[3])


def test_the_batch_s_kernels_listen_on_sockets_of_their_own_not_tcp_ports():
    """Two kernels started at once (two test workers, a JupyterLab beside a batch) raced for a TCP
    port jupyter_client had freed for one of them ("Address already in use": the kernel died
    before its first reply). The batch's kernels use Unix sockets under names of their own."""
    from kit.batch.worker import IpcKernelManager

    one, two = IpcKernelManager(kernel_name="ipu-repro"), IpcKernelManager(kernel_name="ipu-repro")
    assert one.transport == two.transport == "ipc"
    assert one.ip != two.ip and os.path.isabs(one.ip)


def test_a_killed_worker_s_kernel_sockets_are_removed(tmp_path, monkeypatch):
    """A kernel shut down removes its socket files; one killed with its worker (a time limit, a
    stop) cannot: the batch removes those of the pids it killed, and no one else's."""
    import tempfile

    from kit.batch.worker import IpcKernelManager, remove_kernel_sockets

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    ours = [tmp_path / f"kit-kernel-4242-abc-ipc-{i}" for i in (1, 2)]
    theirs = tmp_path / "kit-kernel-777-def-ipc-1"
    for f in (*ours, theirs):
        f.write_text("")
    assert sorted(remove_kernel_sockets([4242])) == ours
    assert theirs.exists() and not any(f.exists() for f in ours)
    km = IpcKernelManager(kernel_name="ipu-repro")
    assert km.ip.startswith(str(tmp_path / f"kit-kernel-{os.getpid()}-"))
