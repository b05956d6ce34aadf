"""`make bench` and `make bench-peers` run end to end: each benchmark once at its smallest
(benchmarks/run_all.py --smoke; benchmarks/peers.py on one row, one batch, one round), so that a
benchmark that no longer runs fails `make test` (issue 52: `make bench` went red unseen). Their
figures mean nothing here; the exit status and the absence of errors are what is checked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.run_all import BENCHMARKS

ROOT = Path(__file__).resolve().parents[2]


def bench_env(tmp_path: Path) -> dict:
    """The benchmarks write under KIT_OUTPUTS and export into KIT_CACHE: both in tmp_path."""
    return {
        **os.environ,
        "KIT_OUTPUTS": str(tmp_path / "outputs"),
        "KIT_CACHE": str(tmp_path / "cache"),
        "KIT_ENDINGS_DIR": str(tmp_path / "endings"),
        "PYTHONPATH": str(ROOT),
    }


@pytest.mark.slow
def test_every_benchmark_of_make_bench_runs_at_its_smallest(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.run_all", "--smoke"],
        cwd=ROOT,
        env=bench_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=900,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    assert [line[3:] for line in done.stdout.splitlines() if line.startswith("== ")] == BENCHMARKS
    assert "Traceback" not in out and "FAILED" not in out, out[-4000:]


@pytest.mark.slow
def test_the_peer_benchmark_runs_at_its_smallest(tmp_path):
    result = tmp_path / "peers.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.peers",
            "--rows",
            "resnet50-torch-fp32:FP16@1",
            "--rounds",
            "1",
            "--seconds",
            "0.05",
            "--arms",
            "ort-fp32,ov-f32",
            "--hardware",
            "cpu",
            "--out",
            str(result),
        ],
        cwd=ROOT,
        env=bench_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=900,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    batch = json.loads(result.read_text())["rows"][0]["batches"][0]
    assert batch["kit"]["throughput_median"] > 0 and "ort-fp32" in batch["peers"], batch
    # each arm through the kit's numerics gate at the precision it computes in
    assert [batch["peers"][a]["numerics_ok"] for a in ("ort-fp32", "ov-f32")] == [True, True]
    assert batch["kit"]["numerics_ok"] is True, batch


def test_smoke_is_the_only_option():
    from benchmarks import run_all

    assert run_all.main(["--fast"]) == 2
