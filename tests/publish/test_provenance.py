"""Provenance complete in every result: the kit's commit and local changes, every installed
distribution, hashes of the published data and the model export, and the job that ran."""

import importlib.metadata
import json
import subprocess

import pytest

from kit.batch.executor import Task
from kit.batch.jobs import Job
from kit.hardware import environment, source
from kit.publish.report.provenance import source_line
from kit.results.sections import Environment


def git(cwd, *args):
    subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True)


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """A git work tree standing in for the kit's own (kit_source reads KIT_TREE)."""
    repo = tmp_path / "tree"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "a.py").write_text("x = 1\n")
    git(repo, "add", "a.py")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    monkeypatch.setattr(source, "KIT_TREE", repo)
    source.kit_source.cache_clear()
    yield repo
    source.kit_source.cache_clear()


def test_commit_dirty_flag_and_the_hash_of_local_changes(tree):
    clean = source.kit_source()
    head = subprocess.run(
        ["git", "-C", str(tree), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout
    assert (
        clean["commit"] == head.strip() and clean["dirty"] is False and clean["diff_sha256"] is None
    )
    (tree / "a.py").write_text("x = 2\n")
    source.kit_source.cache_clear()
    first = source.kit_source()
    assert first["dirty"] is True and len(first["diff_sha256"]) == 64
    (tree / "a.py").write_text("x = 3\n")
    source.kit_source.cache_clear()
    second = source.kit_source()
    assert second["diff_sha256"] != first["diff_sha256"]  # another change, another hash
    (tree / "a.py").write_text("x = 1\n")
    (tree / "new.py").write_text("y = 1\n")
    source.kit_source.cache_clear()
    untracked = source.kit_source()
    assert untracked["dirty"] is True and untracked["untracked"] == ["new.py"]


def test_without_git_the_installed_version_is_said(tmp_path, monkeypatch):
    monkeypatch.setattr(source, "KIT_TREE", tmp_path)  # no .git here nor above tmp_path
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    source.kit_source.cache_clear()
    try:
        found = source.kit_source()
    finally:
        source.kit_source.cache_clear()
    assert found["commit"] is None and found["dirty"] is None and "version only" in found["how"]


def test_capture_lists_every_distribution_and_hashes_the_published_data():
    env = environment.capture()
    assert env["distributions"]["numpy"] == importlib.metadata.version("numpy")
    assert len(env["distributions"]) >= len(env["packages"])
    # the key packages among them
    assert set(env["packages"]) - {"kit"} <= set(env["distributions"])
    reports = source.published_dir() / "bytemlperf_ipu_reports.csv"
    assert env["published_data"]["bytemlperf_ipu_reports.csv"] == source.file_sha256(reports)
    assert env["kit"]["commit"] and len(env["kit"]["commit"]) == 40
    assert env["job"]["rerun"] is None and "interactive" in env["job"]["how"]


def test_a_batch_job_tells_the_kernel_its_command_parameters_and_notebook(tmp_path, monkeypatch):
    job = Job(
        "resnet50",
        "model_benchmark.ipynb",
        {"model": "resnet50-torch-fp32", "batch_sizes": [4]},
        120,
    )
    run_dir = tmp_path / "outputs" / "runs" / "r1"
    task = Task(
        job=job,
        run_dir=run_dir,
        out=tmp_path / "outputs",
        fingerprint="f",
        command="kit reproduce --profile quick --only resnet50",
    )
    spec = task.spec()
    recorded = spec["job"]
    assert recorded["parameters"] == job.parameters and recorded["timeout_s"] == 120
    assert recorded["batch_command"] == "kit reproduce --profile quick --only resnet50"
    assert recorded["rerun"].startswith("kit rerun ") and recorded["rerun"].endswith(
        "runs/r1/resnet50.json"
    )
    assert recorded["result"] == "runs/r1/resnet50.json"
    assert recorded["notebook_sha256"] == source.file_sha256(
        source.KIT_TREE / "notebooks" / "model_benchmark.ipynb"
    )
    monkeypatch.setenv(source.JOB_ENV, json.dumps(recorded))
    assert environment.capture()["job"] == recorded


def test_the_model_export_is_hashed(small):
    assert small.describe()["onnx_sha256"] == source.file_sha256(small.onnx_path)


def test_the_report_shows_one_line_commit_dirty_and_rerun():
    env = {
        "kit": {"commit": "a" * 40, "dirty": True, "diff_sha256": "b" * 64},
        "distributions": {"numpy": "2"},
        "job": {"rerun": "kit rerun outputs/runs/r/x.json"},
    }
    line = source_line(Environment.from_dict(env))
    assert line.startswith("kit aaaaaaaaaaaa (dirty, local changes sha256 bbbbbbbbbbbb)")
    assert "re-run: kit rerun outputs/runs/r/x.json" in line
    assert "not recorded" in source_line(Environment.from_dict({}))  # an older result still reads
    from kit.publish.report.provenance import provenance
    from kit.results import RunResult

    page = provenance(RunResult.new("model_benchmark", "m", {}, env))
    assert (
        "<th style='text-align:left'>Source</th>" in page
        and "re-run: kit rerun outputs/runs/r/x.json" in page
    )


def test_kit_compare_names_the_commit_and_any_other_distribution_that_differs(tmp_path):
    from kit.publish.compare_runs import environment_differences
    from kit.results import RunResult

    def run(commit, dirty, pillow):
        env = {
            "kit": {"commit": commit, "dirty": dirty, "diff_sha256": "c" * 64 if dirty else None},
            "packages": {"numpy": "2.0"},
            "distributions": {"numpy": "2.0", "pillow": pillow},
        }
        result = RunResult.new("model_benchmark", "m", {}, env)
        result.measurements = [{"batch_size": 1}]
        return [(tmp_path / "r.json", result)]

    diffs = environment_differences(run("a" * 40, False, "10.0"), run("b" * 40, True, "11.0"))
    assert ("kit", "aaaaaaaaaaaa", "bbbbbbbbbbbb + local changes cccccccccccc") in diffs
    assert ("distributions: pillow", "10.0", "11.0") in diffs
    assert not [d for d in diffs if d[0] == "distributions: numpy"]  # listed once, under packages
