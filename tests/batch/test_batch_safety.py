"""`make reproduce` as a user meets it: exit status, concurrent runs, selection, corrupt state.

Tiny notebooks made here (no model), run through the real runner and the real `kit` CLI.
"""

import json
import multiprocessing
import os
import re
import shutil
import subprocess
import sys

import pytest

from kit import atomic
from kit.backends import Placement
from kit.batch import Job
from kit.batch.lock import outputs_lock
from kit.batch.runner import new_run_dir, run_jobs
from kit.batch.selection import parse_force, select
from kit.batch.state import CorruptState, read_state, save_state
from kit.cli.main import main as kit_main
from kit.errors import InvalidParameter, KitError
from kit.publish.site import write_index
from tests.batch_notebooks import make_notebook, make_ok_notebook
from tests.conftest import ROOT


@pytest.fixture
def tiny(tmp_path, monkeypatch):
    """A notebooks folder with ok.ipynb (writes ok results) and broken.ipynb (raises)."""
    folder = tmp_path / "notebooks"
    folder.mkdir()
    make_ok_notebook(folder / "ok.ipynb")
    make_notebook(folder / "broken.ipynb", "1 / 0")
    monkeypatch.setenv("KIT_NOTEBOOKS", str(folder))
    return folder


def use_jobs(monkeypatch, jobs):
    """`kit reproduce` runs these jobs instead of the profile's."""
    monkeypatch.setattr(
        "kit.cli.reproduce.jobs_for",
        lambda profile, hardware, research=False, search=True: [Job(**vars(j)) for j in jobs],
    )


def reproduce(capsys, *args):
    code = kit_main(["reproduce", "--hardware", "cpu", *args])
    out, err = capsys.readouterr()
    return code, out.strip().splitlines(), err


@pytest.mark.slow
def test_exit_status_last_line_rebuilt_state_and_resume(outputs, tiny, monkeypatch, capsys):
    use_jobs(monkeypatch, [Job("first", "ok.ipynb"), Job("second", "ok.ipynb")])
    code, lines, _ = reproduce(capsys)
    assert code == 0 and lines[-1].startswith("all 2 notebooks ok")
    use_jobs(monkeypatch, [Job("first", "ok.ipynb"), Job("broken", "broken.ipynb")])
    code, lines, _ = reproduce(capsys)
    assert code == 1
    assert lines[-1].startswith("1 of 2 notebooks not ok") and lines[-1].endswith("broken (failed)")
    assert any("first (reused)" in line for line in lines)
    run_dir = outputs / read_state(outputs)["jobs"]["broken"]["results"].rsplit("/", 1)[0]
    # broken wrote none; the batch's own files are not *.json
    assert not [p.name for p in run_dir.glob("*.json")]

    # a truncated state.json: rebuilt from outputs/runs/, the old file moved aside
    before = json.loads((outputs / "state.json").read_text())
    (outputs / "state.json").write_text(json.dumps(before)[:40])
    assert kit_main(["rebuild-state"]) == 0
    out = capsys.readouterr().out
    assert "rebuilt from 2 runs" in out and "state.json.corrupt-" in out
    assert [p for p in outputs.iterdir() if p.name.startswith("state.json.corrupt-")]
    after = read_state(outputs)
    keys = ("status", "fingerprint", "results", "run_id")
    for name in ("first", "second", "broken"):
        assert {k: after["jobs"][name][k] for k in keys} == {
            k: before["jobs"][name][k] for k in keys
        }
    assert [r["jobs"] for r in after["runs"]] == [["first", "second"], ["first", "broken"]]
    code, lines, _ = reproduce(capsys)  # resumes: `first` reused, `broken` run again
    assert code == 1 and any("first (reused)" in line for line in lines)
    assert any("failed  broken" in line for line in lines)
    use_jobs(monkeypatch, [Job("first", "ok.ipynb")])
    code, lines, _ = reproduce(capsys)
    assert code == 0 and lines[-1].startswith("the notebook ok (")


def test_selection_errors_never_touch_the_index(outputs, tiny, monkeypatch, capsys):
    use_jobs(monkeypatch, [Job("alpha", "ok.ipynb"), Job("beta", "ok.ipynb")])
    (outputs / "index.html").write_text("the last batch's index")
    for args, words in [
        (["--only", "nonexistent"], ["'nonexistent' matches no job", "jobs: alpha, beta"]),
        (["--only", ","], ["no empty word"]),
        (["--only", "alpha,"], ["no empty word"]),
        (["--force", "yes"], ["invalid FORCE='yes'", "0 (reuse"]),
    ]:
        code, _, err = reproduce(capsys, *args)
        assert code == 2 and all(w in err for w in words), (args, err)
    assert (outputs / "index.html").read_text() == "the last batch's index"
    assert not (outputs / "runs").exists()  # nothing was run
    with pytest.raises(KitError, match="no notebooks to index"):
        write_index([], outputs)


def test_select_and_force_values():
    jobs = [Job("resnet50_FP16", "a.ipynb"), Job("bert_FP8", "a.ipynb"), Job("summary", "s.ipynb")]
    assert [j.name for j in select(jobs, "bert,summ")] == ["bert_FP8", "summary"]
    assert select(jobs, None) == jobs
    family = [Job("albert-torch-fp32_FP16", "a.ipynb"), Job("bert-torch-fp32_FP16", "a.ipynb")]
    # whole name
    assert [j.name for j in select(family, "bert-torch-fp32_FP16")] == ["bert-torch-fp32_FP16"]
    assert [j.name for j in select(family, "bert-torch")] == [
        "albert-torch-fp32_FP16",
        "bert-torch-fp32_FP16",
    ]
    for bad in ("", " ", "bert,", ",", "bert,,summary", "gpt"):
        with pytest.raises(InvalidParameter, match="ONLY"):
            select(jobs, bad)
    assert parse_force("1") and not parse_force("0") and parse_force(True)
    for bad in ("yes", "true", "2", ""):
        with pytest.raises(InvalidParameter, match="FORCE"):
            parse_force(bad)


def test_make_reproduce_passes_failures_and_usage_errors_on(tmp_path):
    """The Makefile target: FORCE=yes is refused by kit (make fails), before anything runs."""
    out = tmp_path / "outputs"
    env = {**os.environ, "KIT_OUTPUTS": str(out)}
    # -o: never (re)install the environment from a test
    proc = subprocess.run(
        [
            "make",
            "-s",
            "-C",
            str(ROOT),
            "-o",
            ".venv/.installed",
            "reproduce",
            "FORCE=yes",
            "HARDWARE=cpu",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode != 0 and "invalid FORCE='yes'" in proc.stderr
    assert not (out / "runs").exists()


def test_second_batch_is_refused_while_one_holds_outputs(outputs, tiny, monkeypatch, capsys):
    use_jobs(monkeypatch, [Job("first", "ok.ipynb")])
    with outputs_lock(outputs):
        code, lines, err = reproduce(capsys)
        assert code == 2
        assert not any("notebook" in line for line in lines), lines  # no progress bar drawn
        assert (
            f"another `kit reproduce` (pid {os.getpid()}, started " in err and str(outputs) in err
        )
        # a second process is refused too
        proc = subprocess.run(
            [sys.executable, "-m", "kit.cli.main", "rebuild-state"],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            timeout=120,
        )
        assert proc.returncode == 2 and f"(pid {os.getpid()}," in proc.stderr
    assert not (outputs / "runs").exists()
    with outputs_lock(outputs):  # released: free again
        pass


def _make_run_dirs(out, count, queue):
    queue.put([new_run_dir(out)[0] for _ in range(count)])


def _save_states(out, count, tag, queue):
    errors = 0
    for i in range(count):
        try:
            save_state(out, {"jobs": {}, "runs": [{"run_id": f"{tag}{i}", "jobs": []}]})
            read_state(out)
        except Exception:  # noqa: BLE001 - counted, and the test asserts none
            errors += 1
    queue.put(errors)


def test_run_ids_never_collide_and_state_writes_are_atomic(tmp_path):
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_make_run_dirs, args=(tmp_path, 30, queue)) for _ in range(3)]
    procs += [ctx.Process(target=_save_states, args=(tmp_path, 150, tag, queue)) for tag in "ab"]
    for p in procs:
        p.start()
    results = [queue.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    ids = [i for r in results if isinstance(r, list) for i in r]
    assert len(ids) == 90 and len(set(ids)) == 90
    assert [r for r in results if isinstance(r, int)] == [0, 0]  # no crash, never a partial file
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    atomic.write_text(tmp_path / "x.txt", "one")
    assert (tmp_path / "x.txt").read_text() == "one"


@pytest.mark.parametrize(
    "content, problem",
    [
        ('{"jobs": {"a": {"name": "a"', "not JSON"),
        ('{"jobs": {}}', "missing key 'runs'"),
        ("[]", "top level is list"),
        ('{"jobs": {"a": {"name": "a"}}, "runs": []}', "job 'a' lacks notebook"),
    ],
)
def test_corrupt_state_is_a_clear_error_and_creates_nothing(
    outputs, tiny, monkeypatch, capsys, content, problem
):
    (outputs / "state.json").write_text(content)
    with pytest.raises(CorruptState, match=problem):
        read_state(outputs)
    use_jobs(monkeypatch, [Job("first", "ok.ipynb")])
    code, _, err = reproduce(capsys)
    assert code == 2 and str(outputs / "state.json") in err and problem in err
    assert "kit rebuild-state" in err and "Traceback" not in err
    assert not (outputs / "runs").exists() and not (outputs / "index.html").exists()


@pytest.mark.slow
def test_a_dead_kernel_is_reported_as_killed_with_its_peak_memory(outputs, tiny):
    """A SIGKILL far from the memory limit was reported 'likely out of memory (peak 0.1 GB)'."""
    make_notebook(
        tiny / "hog.ipynb",
        "import os, signal\nblock = bytearray(600 * 2**20)\n"
        "block[::4096] = b'x' * len(block[::4096])\n"
        "os.kill(os.getpid(), signal.SIGKILL)",
    )
    (record,) = run_jobs([Job("hog", "hog.ipynb")], out=outputs)
    assert record.status == "killed"
    assert (
        "likely out of memory" not in record.message
        and "far from the memory limit" in record.message
    )
    peak = float(record.message.split("peak ")[1].split(" GB")[0])
    assert 0.6 <= peak < 4, record.message


class OffersResources:
    """Stands in for a cluster executor: only what `hardware_kinds` asks of one."""

    def __init__(self, *kinds):
        self.kinds = set(kinds)

    def offered(self):
        return self.kinds


def test_one_batch_measures_on_every_kind_the_cluster_offers():
    from kit.batch.jobs import hardware_resource
    from kit.cli.reproduce import hardware_kinds, jobs_on

    assert hardware_kinds("auto", OffersResources("cpu", "ipu", "gpu-memory")) == ["ipu", "cpu"]
    assert hardware_kinds("cuda,cpu,cuda") == ["cuda", "cpu"]
    for wrong in ("cpu,tpu", "cpu,,cuda", ""):  # the whole value named, comma lists said
        with pytest.raises(InvalidParameter, match=f"hardware='{wrong}': .*separated by commas"):
            hardware_kinds(wrong)
    with pytest.raises(InvalidParameter, match="declare no ipu, cuda or cpu"):
        hardware_kinds("auto", OffersResources("memory"))
    single = jobs_on("quick", ["cpu"])
    both = {j.name: j for j in jobs_on("quick", ["ipu", "cpu"])}
    model = next(j.name for j in single if j.notebook == "model_benchmark.ipynb")
    assert (
        hardware_resource(both[f"{model}@ipu"]) == "ipu"
        and hardware_resource(both[f"{model}@cpu"]) == "cpu"
    )
    assert {"published_results", "summary"} <= set(both) and list(both)[-1] == "summary"
    assert hardware_resource(both["published_results"]) is None
    assert len({j.name for j in single}) == len(single) and len(both) < 2 * len(single)


def test_clean_outputs_is_refused_while_a_batch_holds_outputs(outputs, capsys):
    """`make clean-outputs` used to delete the lock and a running batch's files."""
    run = outputs / "runs" / "r1"
    run.mkdir(parents=True)
    (run / "job.json").write_text("{}")
    (outputs / ".gitkeep").write_text("")
    with outputs_lock(outputs):
        assert kit_main(["clean-outputs"]) == 2
        err = capsys.readouterr().err
        assert (
            f"another `kit reproduce` (pid {os.getpid()}, started " in err and str(outputs) in err
        )
        assert (run / "job.json").exists() and (outputs / ".reproduce.lock").exists()
    assert kit_main(["clean-outputs"]) == 0
    assert sorted(p.name for p in outputs.iterdir()) == [".gitkeep", ".reproduce.lock"]
    with outputs_lock(outputs):  # `kit site` waits its turn too
        assert kit_main(["site"]) == 2


def test_an_outputs_folder_that_cannot_be_written_is_one_line_and_exit_2(
    tmp_path, tiny, monkeypatch, capsys
):
    """A read-only outputs/ gave a raw filelock traceback and exit 1 (reserved for 'not ok')."""
    if os.geteuid() == 0:  # root writes through file modes: use a file system that refuses it
        out = "/sys/kit-outputs"
    else:
        out = tmp_path / "outputs"
        out.mkdir()
        out.chmod(0o555)
    monkeypatch.setenv("KIT_OUTPUTS", str(out))
    use_jobs(monkeypatch, [Job("first", "ok.ipynb")])
    code, _, err = reproduce(capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: cannot write {out}")
    assert "point KIT_OUTPUTS at a writable folder" in lines[0]
    assert kit_main(["clean-outputs"]) == 2


def test_result_json_and_search_cache_files_are_readable_by_all_as_the_html(tmp_path):
    """They were 0600 (tempfile.mkstemp's mode) beside 0644 HTML."""
    from kit.results import ResultKind, RunResult
    from kit.search import cache
    from kit.search.decision import Decision, Plan

    result = RunResult(ResultKind.MODEL_BENCHMARK, "m", parameters={}, environment={}).write(
        tmp_path / "r.json"
    )
    key = {"model": "m.onnx", "published": "FP16", "batch_size": 1}
    decision = cache.store_decision(
        Decision(
            chosen=None, today=None, plan=Plan(Placement("onnxruntime", "fp32", "cpu")), key=key
        ),
        tmp_path / "search",
    )
    for path in (result, decision):
        assert path.stat().st_mode & 0o777 == 0o644, path


def test_a_kind_that_cannot_run_here_is_refused_before_any_job(outputs, tiny, monkeypatch, capsys):
    """HARDWARE=cuda on a machine without a CUDA backend ran every job to a failure, and each
    failure replaced the job's earlier ok result in the index; now exit 2, naming why, with the
    state as it was."""
    from kit.hardware import cuda, ipu

    use_jobs(monkeypatch, [Job("row", "ok.ipynb")])
    assert reproduce(capsys)[0] == 0
    before = read_state(outputs)
    monkeypatch.setattr(cuda, "gpu_names", lambda: ())
    monkeypatch.setattr(cuda, "cuda_backend_loads", lambda: "torch 2.13.0+cpu sees no CUDA device")
    monkeypatch.setattr(ipu, "ipu_present", lambda: False)
    monkeypatch.delenv("KIT_IPU_PYTHON", raising=False)
    for asked, why in (
        ("cuda", "cuda: cuda asked for, but no CUDA backend loads here .*sees no CUDA device"),
        ("cpu,ipu", r"ipu: no IPU here .*KIT_IPU_PYTHON unset"),
    ):
        code = kit_main(["reproduce", "--hardware", asked])
        err = capsys.readouterr().err
        assert code == 2 and re.search(f"invalid hardware='{asked}': .*{why}", err), err
        assert read_state(outputs) == before
    assert kit_main(["reproduce", "--hardware", "cuda", "--plan", "1"]) == 0  # planned anywhere


def fake_gc_info(bin_dir, board: str, architecture: str) -> None:
    """A `gc-info` on PATH printing the documented `gc-info -d 0 -i` fields of one board."""
    bin_dir.mkdir(exist_ok=True)
    exe = bin_dir / "gc-info"
    exe.write_text(
        f"#!/bin/sh\nprintf 'Device Info:\\n  id: 0\\n  board type: {board}\\n"
        f"  ipu architecture: {architecture}\\n  clock: 1850MHz\\n'\n"
    )
    exe.chmod(0o755)


@pytest.mark.slow
def test_a_result_is_not_reused_on_another_part_of_the_same_kind(
    outputs, tiny, monkeypatch, capsys, tmp_path
):
    """A C600 result was reused on an M2000 ('all 2 notebooks ok', nothing measured): the reuse
    fingerprint held the kind, not the part."""
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    use_jobs(monkeypatch, [Job("row", "ok.ipynb")])
    fake_gc_info(tmp_path / "bin", "C600", "ipu21")
    assert reproduce(capsys, "--hardware", "ipu")[0] == 0
    code, lines, _ = reproduce(capsys, "--hardware", "ipu")
    assert code == 0 and any("row (reused)" in line for line in lines)  # same part: reused
    fake_gc_info(tmp_path / "bin", "M2000", "ipu2")
    code, lines, _ = reproduce(capsys, "--hardware", "ipu")
    assert code == 0 and not any("(reused)" in line for line in lines), lines
    assert len(read_state(outputs)["runs"][-1]["jobs"]) == 1


@pytest.mark.slow
def test_two_ipu_runs_whose_part_gc_info_cannot_name_are_never_reused(
    outputs, tiny, monkeypatch, capsys, tmp_path
):
    """A C600 FP8 result was reused on an emulated M2000 without gc-info: both read 'IPU part
    unknown'."""
    if shutil.which("gc-info"):
        pytest.skip("gc-info is on PATH here: the part is known")
    monkeypatch.setenv("KIT_IPU_PYTHON", sys.executable)  # as an emulated run names the double's
    use_jobs(monkeypatch, [Job("row", "ok.ipynb")])
    assert reproduce(capsys, "--hardware", "ipu")[0] == 0
    code, lines, _ = reproduce(capsys, "--hardware", "ipu")
    assert code == 0 and not any("(reused)" in line for line in lines), lines


@pytest.mark.slow
@pytest.mark.skipif(
    len(os.sched_getaffinity(0)) < 2, reason="needs two usable cores to take one away"
)
def test_a_result_is_not_reused_with_other_usable_cores_or_cpu_flags(
    outputs, tiny, monkeypatch, capsys, tmp_path
):
    """`make reproduce SEARCH=0` on 2 cores, then under `taskset -c 0`: every figure was '(reused)'
    with its 2-core label. Also a changed flag set (another host of the same CPU model) and
    threads."""
    use_jobs(monkeypatch, [Job("row", "ok.ipynb")])
    assert reproduce(capsys)[0] == 0
    assert any("row (reused)" in line for line in reproduce(capsys)[1])  # nothing changed: reused
    cores = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(cores)})  # as under `taskset -c 0`
    try:
        code, lines, _ = reproduce(capsys)
    finally:
        os.sched_setaffinity(0, cores)
    assert code == 0 and not any("(reused)" in line for line in lines), lines
    # the latest is the 1-core figure
    assert not any("(reused)" in line for line in reproduce(capsys)[1])
    assert any("row (reused)" in line for line in reproduce(capsys)[1])
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor : 0\nflags : fpu sse avx2 avx512f\n")
    monkeypatch.setattr("kit.hardware.cpu.CPUINFO", cpuinfo)
    assert not any("(reused)" in line for line in reproduce(capsys)[1])
    cpuinfo.write_text("processor : 0\nflags : fpu sse avx2 avx512f avx512_bf16 amx_tile\n")
    assert not any("(reused)" in line for line in reproduce(capsys)[1])
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert not any("(reused)" in line for line in reproduce(capsys)[1])


FULL_DISK = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG, as ENOSPC \
on a full disk
resource.setrlimit(resource.RLIMIT_FSIZE, (40, 40))
from kit.cli.main import main
sys.exit(main(["reproduce", "--hardware", "cpu", "--only", "published"]))
"""


def test_an_outputs_folder_that_fills_up_is_one_line_and_exit_2(tmp_path):
    """A full disk gave three chained tracebacks and exit 1."""
    out = tmp_path / "outputs"
    proc = subprocess.run(
        [sys.executable, "-c", FULL_DISK],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT), "KIT_OUTPUTS": str(out)},
    )
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1 and lines[0].startswith(f"error: cannot write {out}/"), proc.stderr
    assert "File too large; raise the file-size limit" in lines[0] and ".tmp" not in lines[0]
    assert not [p for p in out.rglob("*.tmp")]  # no half-written file left behind


def test_the_index_never_shows_ok_for_a_job_whose_files_are_gone(outputs):
    """After a clean under a running batch the index showed published_results 'ok' with no
    report."""
    record = {
        "name": "published_results",
        "notebook": "published_results.ipynb",
        "status": "ok",
        "run_id": "r1",
        "duration_s": 1.0,
        "fingerprint": "f",
        "html": "runs/r1/published_results.html",
        "results": "runs/r1/published_results.json",
        "message": "",
    }
    page = write_index([record], outputs).read_text()
    assert ">missing: its report and results are not in outputs/ (run it again)<" in page
    assert "class='ok'>ok<" not in page


def test_a_run_whose_end_was_never_recorded_is_marked_aborted_by_the_next(outputs, tiny):
    """A batch that died on a full disk stayed 'running' in the state for ever."""
    save_state(outputs, {"jobs": {}, "runs": [{"run_id": "old", "jobs": [], "status": "running"}]})
    run_jobs([Job("first", "ok.ipynb")], out=outputs)
    old, new = read_state(outputs)["runs"]
    assert old["status"] == "aborted" and "never recorded" in old["note"]
    assert new["status"] == "complete"


def test_make_clean_outputs_is_refused_while_a_batch_holds_outputs(outputs):
    """`make clean-outputs` deleted outputs/.reproduce.lock and the running batch's files."""
    bin_dir = os.path.dirname(sys.executable)
    if not os.access(os.path.join(bin_dir, "kit"), os.X_OK):
        pytest.skip(
            "no `kit` script beside this Python (without it make would clean the real outputs/)"
        )
    (outputs / "runs" / "r1").mkdir(parents=True)
    env = {**os.environ, "KIT_OUTPUTS": str(outputs), "PYTHONPATH": str(ROOT)}
    with outputs_lock(outputs):
        proc = subprocess.run(
            ["make", "-s", "-C", str(ROOT), "clean-outputs", f"BIN={bin_dir}"],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert proc.returncode != 0 and "another `kit reproduce` (pid" in proc.stderr
        assert (outputs / "runs" / "r1").is_dir() and (outputs / ".reproduce.lock").exists()
    proc = subprocess.run(
        ["make", "-s", "-C", str(ROOT), "clean-outputs", f"BIN={bin_dir}"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0 and not (outputs / "runs").exists()


def test_every_write_of_the_batch_stays_in_its_run_folder(tmp_path):
    """Issue 51: a job name became paths unchecked, and save_record applied it twice (the results'
    folder, then the name again): `.record` went one traversal further than the results."""
    from kit.batch.executor import Task
    from kit.batch.jobs import JobRecord
    from kit.batch.state import save_record

    with pytest.raises(InvalidParameter, match=r"invalid job name='\.\./x': a plain name"):
        Job("../x", "ok.ipynb")
    with pytest.raises(InvalidParameter, match="invalid notebook='../evil.ipynb'"):
        Job("x", "../evil.ipynb")
    job = Job("x", "ok.ipynb")
    job.name = "../../x"  # changed after it was checked: the path helper refuses it still
    run_dir = tmp_path / "outputs" / "runs" / "r1"
    with pytest.raises(InvalidParameter, match="a path inside"):
        Task(job=job, run_dir=run_dir, out=tmp_path / "outputs", fingerprint="").path(".json")
    record = JobRecord(
        name="x",
        notebook="ok.ipynb",
        status="ok",
        run_id="r1",
        duration_s=1.0,
        fingerprint="",
        notebook_out="runs/r1/x.ipynb",
        html="runs/r1/x.html",
        results="runs/r1/x.json",
    )
    save_record(tmp_path / "outputs", record)
    assert [p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()] == [
        "outputs/runs/r1/x.record"
    ]
    for name in ("../../escaped", "/tmp/escaped"):
        with pytest.raises(InvalidParameter, match="job name"):
            save_record(
                tmp_path / "outputs",
                JobRecord(
                    name=name,
                    notebook="ok.ipynb",
                    status="ok",
                    run_id="r1",
                    duration_s=1.0,
                    fingerprint="",
                    notebook_out="",
                    html="",
                    results=f"runs/r1/{name}.json",
                ),
            )
    assert len([p for p in tmp_path.rglob("*") if p.is_file()]) == 1


@pytest.mark.parametrize(
    "jobs, problem",
    [
        ({"../../escaped": {}}, "job name '../../escaped' is not a plain name"),
        (
            {
                "x": {
                    "name": "x",
                    "notebook": "ok.ipynb",
                    "status": "ok",
                    "run_id": "r",
                    "fingerprint": "",
                    "html": "../../x.html",
                    "results": "runs/r/x.json",
                }
            },
            "has html '../../x.html', not a file under runs/",
        ),
    ],
)
def test_a_state_naming_paths_outside_outputs_is_corrupt(outputs, jobs, problem):
    save_state(outputs, {"jobs": jobs, "runs": []})
    with pytest.raises(CorruptState, match=re.escape(problem)):
        read_state(outputs)


def test_a_job_whose_notebook_is_gone_is_named_before_anything_runs(
    outputs, tiny, monkeypatch, capsys
):
    """A missing notebook was a raw FileNotFoundError (its fingerprint read it unchecked)."""
    use_jobs(monkeypatch, [Job("first", "ok.ipynb"), Job("gone", "gone.ipynb")])
    code, _, err = reproduce(capsys)
    assert code == 2 and err.startswith(
        "error: notebook 'gone.ipynb' is not one of the project's notebooks in "
    )
    assert "broken.ipynb, ok.ipynb" in err and len(err.strip().splitlines()) == 1
    assert not list((outputs / "runs").glob("*/*.json"))  # nothing ran
