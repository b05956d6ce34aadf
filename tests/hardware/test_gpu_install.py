"""kit/hardware/gpu_install.py: the install chooses the GPU builds from what `nvidia-smi -L` says,
stops on a driver too old for them, and leaves one working ONNX Runtime build however often it
runs."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from kit.hardware import gpu_install

ROOT = Path(__file__).resolve().parents[2]
LISTED = (
    "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-1b2c)\nGPU 1: NVIDIA A100-SXM4-80GB (UUID: GPU-3d4e)\n"
)
NO_DRIVER = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that "
    "the latest NVIDIA driver is installed and running.\n"
)


@pytest.mark.parametrize(
    ("gpu", "returncode", "output", "kind"),
    [
        ("auto", 0, LISTED, "gpu"),
        ("auto", None, "", "cpu"),  # no nvidia-smi on PATH
        ("auto", 9, NO_DRIVER, "cpu"),  # nvidia-smi present, no driver loaded
        ("auto", 0, "No devices found.\n", "cpu"),
        ("auto", 0, "", "cpu"),
        ("1", None, "", "gpu"),  # GPU=1: prepare a GPU environment anywhere
        ("0", 0, LISTED, "cpu"),  # GPU=0: today's CPU install even on a GPU host
    ],
)
def test_choice_from_nvidia_smi(gpu, returncode, output, kind):
    assert gpu_install.choose(gpu, returncode, output) == kind


def test_bad_value_names_the_choices():
    with pytest.raises(ValueError, match="invalid GPU='yes'.*auto.*1.*0"):
        gpu_install.choose("yes", 0, LISTED)


def test_script_runs_with_the_standard_library_only():
    """The Makefile runs it with the system Python before the venv exists."""
    out = subprocess.run(
        [sys.executable, "-S", str(ROOT / "kit" / "hardware" / "gpu_install.py"), "0"],
        capture_output=True,
        text=True,
        cwd="/",
    )
    assert (out.returncode, out.stdout) == (0, "cpu\n")
    bad = subprocess.run(
        [sys.executable, str(ROOT / "kit" / "hardware" / "gpu_install.py"), "maybe"],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "invalid GPU='maybe'" in bad.stderr


@pytest.mark.skipif(not shutil.which("make"), reason="make is not installed")
@pytest.mark.parametrize("gpu", ["0", "1"])
def test_makefile_install_recipe(gpu, tmp_path):
    out = subprocess.run(
        [
            "make",
            "--no-print-directory",
            "-n",
            "install",
            f"GPU={gpu}",
            f"STAMP={tmp_path}/stamp",
            f"PYTHON={sys.executable}",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    kind = "gpu" if gpu == "1" else "cpu"
    lines = out.stdout.splitlines()
    other = "requirements-cpu.txt" if kind == "gpu" else "requirements-gpu.txt"
    assert other not in out.stdout  # the other build's ONNX Runtime is never installed
    install = lines.index(f"{sys.executable} kit/hardware/gpu_install.py check {gpu}")
    assert install == 0  # the driver check comes before anything is installed
    pip = next(
        i
        for i, line in enumerate(lines)
        if f"-r requirements.txt -r requirements-{kind}.txt -c constraints.txt" in line
    )
    assert lines[pip + 1] == f".venv/bin/python kit/hardware/gpu_install.py onnxruntime {kind}"


def test_requirements_name_onnxruntime_only_in_the_build_files():
    """requirements.txt installs neither build: on a GPU host the CPU onnxruntime never lands."""

    def names(file):
        return {
            line.split("#")[0].split("==")[0].strip()
            for line in (ROOT / file).read_text().splitlines()
        } - {""}

    assert not names("requirements.txt") & {"onnxruntime", "onnxruntime-gpu"}
    assert "onnxruntime" in names("requirements-cpu.txt") and "onnxruntime-gpu" not in names(
        "requirements-cpu.txt"
    )
    assert {"onnxruntime-gpu", "tensorrt-cu13-libs"} <= names("requirements-gpu.txt")
    assert "onnxruntime" not in names("requirements-gpu.txt")
    assert (
        gpu_install.pinned("gpu") == "onnxruntime-gpu==1.31.1"
        and gpu_install.pinned("cpu") == "onnxruntime"
    )


# ------------------------------------------------------ the driver (item: CUDA 13 wheels need R580)


@pytest.mark.parametrize(
    ("gpu", "driver", "stops"),
    [
        # a CUDA 12.9 driver: torch 2.13.0 / onnxruntime-gpu 1.31.1 cannot run
        ("auto", "575.57.08", True),
        ("1", "570.133.20", True),
        ("auto", "580.65.06", False),
        ("auto", "590.44.01", False),
        ("0", "575.57.08", False),  # GPU=0: the CPU builds, whatever the driver
        ("auto", None, False),  # no driver to read: nothing to check
    ],
)
def test_driver_check(monkeypatch, gpu, driver, stops):
    monkeypatch.setattr(gpu_install, "nvidia_smi_list", lambda: (0, LISTED))
    message = gpu_install.check(gpu, driver)
    assert (message is not None) == stops
    if stops:
        assert message.startswith(
            f"make install stopped: NVIDIA driver {driver} is older than R580, which the "
            "pinned CUDA 13 builds need"
        )
        assert (
            "update the NVIDIA driver to R580 or newer" in message
            and "`make install GPU=0`" in message
        )


def test_driver_version_from_nvidia_smi(monkeypatch):
    monkeypatch.setattr(gpu_install, "nvidia_smi", lambda *a: (0, "575.57.08\n575.57.08\n"))
    assert gpu_install.driver_version() == "575.57.08"
    monkeypatch.setattr(gpu_install, "nvidia_smi", lambda *a: (9, NO_DRIVER))
    assert gpu_install.driver_version() is None


def fake_nvidia_smi(folder: Path, driver: str) -> dict:
    """An `nvidia-smi` on PATH that lists two A100s on `driver`; the environment to run with it."""
    script = folder / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        f'case "$1" in -L) printf "{LISTED}" ;; --query-gpu=driver_version) printf '
        f'"{driver}\\n{driver}\\n" ;; '
        "*) exit 6 ;; esac\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return {**os.environ, "PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}


def test_script_check_stops_on_an_old_driver(tmp_path):
    script = str(ROOT / "kit" / "hardware" / "gpu_install.py")
    env = fake_nvidia_smi(tmp_path, "575.57.08")
    old = subprocess.run(
        [sys.executable, "-S", script, "check", "auto"], capture_output=True, text=True, env=env
    )
    assert old.returncode == 1 and "NVIDIA driver 575.57.08 is older than R580" in old.stderr
    assert (
        subprocess.run(
            [sys.executable, "-S", script, "check", "0"], capture_output=True, env=env
        ).returncode
        == 0
    )
    env = fake_nvidia_smi(tmp_path, "580.82.07")
    new = subprocess.run(
        [sys.executable, "-S", script, "check", "auto"], capture_output=True, text=True, env=env
    )
    assert (new.returncode, new.stderr) == (0, "")


# ---------------------------------------------------------------- re-install in a scratch venv


def stand_in_wheel(folder: Path, name: str, version: str, providers: list[str] | None) -> None:
    """A pure-Python wheel named like the real one; ORT stand-ins install the `onnxruntime` module
    (several files, as both real builds do) and list `providers`."""
    dist = name.replace("-", "_")
    files = {}
    if providers is not None:
        files["onnxruntime/__init__.py"] = (
            f"from onnxruntime.capi.providers import get_available_providers\nBUILD = {name!r}\n"
        )
        files["onnxruntime/capi/__init__.py"] = ""
        files["onnxruntime/capi/providers.py"] = (
            f"def get_available_providers():\n    return {providers!r}\n"
        )
    else:
        files[f"{dist}/__init__.py"] = ""
    info = f"{dist}-{version}.dist-info"
    files[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    files[f"{info}/WHEEL"] = (
        "Wheel-Version: 1.0\nGenerator: kit-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    files[f"{info}/RECORD"] = "".join(f"{path},,\n" for path in [*files, f"{info}/RECORD"])
    with zipfile.ZipFile(folder / f"{dist}-{version}-py3-none-any.whl", "w") as whl:
        for path, text in files.items():
            whl.writestr(path, text)


@pytest.fixture(scope="module")
def scratch_venv(tmp_path_factory):
    """A venv with pip and no index: only the stand-in wheels can be installed."""
    base = tmp_path_factory.mktemp("reinstall")
    wheels = base / "wheels"
    wheels.mkdir()
    stand_in_wheel(wheels, "onnxruntime", "1.31.1", ["CPUExecutionProvider"])
    stand_in_wheel(
        wheels, "onnxruntime-gpu", "1.31.1", ["CUDAExecutionProvider", "CPUExecutionProvider"]
    )
    stand_in_wheel(wheels, "tensorrt-cu13-libs", "10.16.1.11", None)
    made = subprocess.run(
        [sys.executable, "-m", "venv", str(base / "venv")], capture_output=True, text=True
    )
    if made.returncode or not (base / "venv" / "bin" / "pip").exists():
        pytest.skip(f"no venv with pip here: {made.stderr.strip()[-200:]}")
    env = {
        **os.environ,
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(wheels),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    env.pop("PYTHONPATH", None)
    return base / "venv", env


def recipe_lines(venv: Path, gpu: str) -> list[str]:
    """The Makefile's install lines for ONNX Runtime, run against `venv` (requirements.txt's other
    packages left out: no downloads)."""
    out = subprocess.run(
        [
            "make",
            "--no-print-directory",
            "-n",
            "install",
            f"GPU={gpu}",
            f"VENV={venv}",
            "STAMP=/nonexistent/stamp",
            f"PYTHON={sys.executable}",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    lines = [
        line
        for line in out.stdout.splitlines()
        if "requirements-" in line or "gpu_install.py onnxruntime" in line
    ]
    return [line.replace(" -r requirements.txt", "") for line in lines]


def state(venv: Path, env: dict) -> tuple[str, list[str]]:
    """(what `import onnxruntime` lists, the ORT distributions installed) in the venv."""
    probe = (
        "import importlib.metadata as m, onnxruntime as o; "
        "print(','.join(o.get_available_providers())); "
        "print(' '.join(sorted(d.metadata['Name'] for d in m.distributions() if "
        "d.metadata['Name'].startswith('onnxruntime'))))"
    )
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", probe],
        capture_output=True,
        text=True,
        env=env,
        cwd="/",
    )
    if done.returncode:
        return f"broken: {done.stderr.strip().splitlines()[-1]}", []
    providers, dists = done.stdout.splitlines()
    return providers, dists.split()


def install(venv: Path, env: dict, gpu: str) -> None:
    for line in recipe_lines(venv, gpu):
        subprocess.run(line, shell=True, check=True, cwd=ROOT, env=env)


@pytest.mark.skipif(not shutil.which("make"), reason="make is not installed")
def test_reinstall_keeps_onnxruntime_working(scratch_venv):
    """The issue's case: a second GPU install (stale stamp), a CPU environment turned GPU and back,
    and an environment whose shared `onnxruntime/` files a plain uninstall deleted."""
    venv, env = scratch_venv
    gpu = ("CUDAExecutionProvider,CPUExecutionProvider", ["onnxruntime-gpu"])
    cpu = ("CPUExecutionProvider", ["onnxruntime"])
    install(venv, env, "1")
    assert state(venv, env) == gpu
    install(venv, env, "1")  # make install again: nothing breaks
    assert state(venv, env) == gpu
    install(venv, env, "0")  # the same environment, GPU=0
    assert state(venv, env) == cpu
    install(venv, env, "1")
    assert state(venv, env) == gpu
    pip = [str(venv / "bin" / "python"), "-m", "pip", "-q"]
    # the old recipe's steps
    subprocess.run([*pip, "install", "onnxruntime==1.31.1"], check=True, env=env)
    subprocess.run([*pip, "uninstall", "-y", "onnxruntime"], check=True, env=env)
    assert state(venv, env)[0].startswith("broken")
    install(venv, env, "1")
    assert state(venv, env) == gpu


@pytest.mark.skipif(not shutil.which("make"), reason="make is not installed")
def test_make_install_stops_before_installing_anything_on_an_old_driver(tmp_path):
    env = fake_nvidia_smi(tmp_path, "575.57.08")
    out = subprocess.run(
        [
            "make",
            "--no-print-directory",
            "install",
            f"VENV={tmp_path}/venv",
            f"STAMP={tmp_path}/stamp",
            f"PYTHON={sys.executable}",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
    )
    assert out.returncode != 0 and not (tmp_path / "venv").exists()
    assert "make install stopped: NVIDIA driver 575.57.08 is older than R580" in out.stderr


# ------------------------------------------------- `make install` with a fake venv: which steps run

FAKE_PYTHON = """#!/bin/sh
echo "$*" >> "$(dirname "$0")/../calls.log"
case "$*" in *"-r requirements-gpu.txt"*)
  if [ -n "$FAIL_GPU_PIP" ]; then
    echo "Collecting tensorrt-cu13-libs==10.16.1.11"
    printf 'Traceback (most recent call last):\\n  ...\\nERROR: Failed to build \
tensorrt-cu13-libs\\n' >&2
    exit 1
  fi ;;
esac
"""


def fake_venv(tmp_path: Path, installed: str) -> Path:
    """A venv whose python logs each call (pip included) to calls.log; installed as `installed`."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text(FAKE_PYTHON)
    (venv / "bin" / "python").chmod(0o755)
    (venv / "calls.log").write_text("")
    (venv / ".installed").write_text(installed + "\n")
    return venv


def no_driver(folder: Path) -> dict:
    """An `nvidia-smi` that finds no driver, as on a host without one."""
    script = folder / "nvidia-smi"
    script.write_text(f"#!/bin/sh\nprintf '{NO_DRIVER}'\nexit 9\n")
    script.chmod(0o755)
    return {**os.environ, "PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}


def make_install(venv: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            "make",
            "--no-print-directory",
            "install",
            f"VENV={venv}",
            f"PYTHON={sys.executable}",
            *args,
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )


def message(stderr: str) -> str:
    """The kit's line in make's stderr (make adds its own 'make: *** ... Error 1')."""
    lines = [line for line in stderr.splitlines() if not re.match(r"make(\[\d+\])?: \*\*\*", line)]
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.mark.skipif(not shutil.which("make"), reason="make is not installed")
def test_gpu_1_without_a_driver_is_refused_before_pip_and_keeps_the_stamp(tmp_path):
    """GPU=1 without a driver: the check passed, then 125 lines of pip traceback and no stamp."""
    venv = fake_venv(tmp_path, "cpu")
    env = no_driver(tmp_path)
    done = make_install(venv, env, "GPU=1")
    assert done.returncode != 0
    assert message(done.stderr) == (
        "make install stopped: GPU=1 asks for the GPU builds (requirements-gpu.txt), but "
        "`nvidia-smi -L` lists no GPU here (no NVIDIA driver): they could not run on this host, "
        "and tensorrt-cu13-libs is fetched from NVIDIA's index (https://pypi.nvidia.com), which a "
        "plain PyPI mirror does not serve. Choices: `make install GPU=0` (the CPU builds), or "
        "`make install GPU=1` on the GPU host; nothing was installed (.venv/.installed, if any, is "
        "left as it was)"
    )
    assert (venv / "calls.log").read_text() == ""  # pip never ran
    assert (venv / ".installed").read_text() == "cpu\n"
    again = make_install(venv, env)  # GPU=auto: the CPU environment as it is
    assert again.returncode == 0 and (venv / "calls.log").read_text() == ""


@pytest.mark.skipif(not shutil.which("make"), reason="make is not installed")
def test_gpu_1_on_a_cpu_environment_installs_the_gpu_builds_and_a_failed_pip_is_one_line(tmp_path):
    """GPU=1 on an installed CPU venv said 'Nothing to be done'."""
    venv = fake_venv(tmp_path, "cpu")
    env = fake_nvidia_smi(tmp_path, "590.44.01")
    failed = make_install(venv, {**env, "FAIL_GPU_PIP": "1"}, "GPU=1")
    assert failed.returncode != 0
    line = message(failed.stderr)
    assert line.startswith(
        "make install stopped: pip could not install requirements-gpu.txt (ERROR: Failed to "
        f"build tensorrt-cu13-libs); its output is in {venv}/pip-install.log; tensorrt-cu13-libs "
        "is fetched from NVIDIA's index (https://pypi.nvidia.com)"
    ), line
    assert (
        "PIP_EXTRA_INDEX_URL=https://pypi.nvidia.com" in line
        and "Traceback" in (venv / "pip-install.log").read_text()
    )
    assert (venv / ".installed").read_text() == "cpu\n"

    (venv / "calls.log").write_text("")
    assert make_install(venv, env, "GPU=1").returncode == 0
    calls = (venv / "calls.log").read_text()
    assert "-r requirements.txt -r requirements-gpu.txt -c constraints.txt" in calls
    assert "kit/hardware/gpu_install.py onnxruntime gpu" in calls
    assert (venv / ".installed").read_text() == "gpu\n"

    (venv / "calls.log").write_text("")
    for args in (["GPU=1"], []):  # the same build, or auto: nothing to do
        assert (
            make_install(venv, env, *args).returncode == 0
            and (venv / "calls.log").read_text() == ""
        )
    assert make_install(venv, env, "GPU=0").returncode == 0  # and back
    assert "-r requirements-cpu.txt" in (venv / "calls.log").read_text()
    assert (venv / ".installed").read_text() == "cpu\n"
