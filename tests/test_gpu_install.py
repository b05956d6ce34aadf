"""kit/hardware/gpu_install.py: the install chooses the GPU builds from what `nvidia-smi -L` says."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kit.hardware import gpu_install

ROOT = Path(__file__).resolve().parent.parent
LISTED = "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-1b2c)\nGPU 1: NVIDIA A100-SXM4-80GB (UUID: GPU-3d4e)\n"
NO_DRIVER = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that "
             "the latest NVIDIA driver is installed and running.\n")


@pytest.mark.parametrize(("gpu", "returncode", "output", "kind"), [
    ("auto", 0, LISTED, "gpu"),
    ("auto", None, "", "cpu"),  # no nvidia-smi on PATH
    ("auto", 9, NO_DRIVER, "cpu"),  # nvidia-smi present, no driver loaded
    ("auto", 0, "No devices found.\n", "cpu"),
    ("auto", 0, "", "cpu"),
    ("1", None, "", "gpu"),  # GPU=1: prepare a GPU environment anywhere
    ("0", 0, LISTED, "cpu"),  # GPU=0: today's CPU install even on a GPU host
])
def test_choice_from_nvidia_smi(gpu, returncode, output, kind):
    assert gpu_install.choose(gpu, returncode, output) == kind


def test_bad_value_names_the_choices():
    with pytest.raises(ValueError, match="invalid GPU='yes'.*auto.*1.*0"):
        gpu_install.choose("yes", 0, LISTED)


def test_script_runs_with_the_standard_library_only():
    """The Makefile runs it with the system Python before the venv exists."""
    out = subprocess.run([sys.executable, "-S", str(ROOT / "kit" / "hardware" / "gpu_install.py"), "0"],
                         capture_output=True, text=True, cwd="/")
    assert (out.returncode, out.stdout) == (0, "cpu\n")
    bad = subprocess.run([sys.executable, str(ROOT / "kit" / "hardware" / "gpu_install.py"), "maybe"], capture_output=True, text=True)
    assert bad.returncode == 2 and "invalid GPU='maybe'" in bad.stderr


@pytest.mark.skipif(not shutil.which("make"), reason="make is not installed")
@pytest.mark.parametrize("gpu", ["0", "1"])
def test_makefile_install_recipe(gpu, tmp_path):
    out = subprocess.run(["make", "-n", "install", f"GPU={gpu}", f"STAMP={tmp_path}/stamp", f"PYTHON={sys.executable}"],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    gpu_lines = [line for line in out.stdout.splitlines() if "requirements-gpu.txt" in line]
    assert bool(gpu_lines) == (gpu == "1")
    assert "pip install -q -r requirements.txt -c constraints.txt" in out.stdout  # the CPU install, unchanged
    if gpu == "1":
        assert "pip uninstall -q -y onnxruntime &&" in gpu_lines[0]
