"""Which build `make install` installs, whether this host's NVIDIA driver can run it, and one ONNX
Runtime build in the environment, never two.

The Makefile runs this file with the system Python before the virtual environment exists (and the
`onnxruntime` step with the environment's Python), so it uses the standard library only:

    python3 kit/hardware/gpu_install.py auto   # gpu when `nvidia-smi -L` lists a GPU, else cpu
    python3 kit/hardware/gpu_install.py 1      # gpu (GPU=1), e.g. to prepare an environment for a GPU host
    python3 kit/hardware/gpu_install.py 0      # cpu (GPU=0): the CPU builds, whatever the machine has
    python3 kit/hardware/gpu_install.py check auto   # exit 1 with the choices: a driver too old, GPU=1 without one
    python3 kit/hardware/gpu_install.py pip-failed gpu .venv/pip-install.log   # the line a failed pip ends with
    .venv/bin/python kit/hardware/gpu_install.py onnxruntime gpu   # remove the other ORT build, repair this one

`gpu` installs requirements-gpu.txt (onnxruntime-gpu, the TensorRT libraries) and `cpu`
requirements-cpu.txt (onnxruntime) beside requirements.txt. Both ORT builds install the same
`onnxruntime` module: installing one over the other, or uninstalling one, breaks the other's files,
so the CPU build is never installed on the GPU path (and the reverse), and a build whose files are
gone is installed again.
"""  # noqa: E501

from __future__ import annotations

import importlib.metadata
import re
import shutil
import subprocess
import sys
from pathlib import Path

CHOICES = ("auto", "0", "1")
ROOT = Path(__file__).resolve().parents[2]
#: The pinned GPU wheels (torch 2.13.0 -> cuda-toolkit 13.0.3, onnxruntime-gpu 1.31.1) are CUDA 13
#: builds; CUDA 13.0 needs an R580 driver (580.65.06 or newer on Linux).
CUDA_MAJOR = 13
DRIVER_NEEDED = 580
ORT_BUILDS = {"gpu": "onnxruntime-gpu", "cpu": "onnxruntime"}
#: tensorrt-cu13-libs's install fetches NVIDIA's libraries from NVIDIA's own index, not from PyPI.
NVIDIA_INDEX = "https://pypi.nvidia.com"
STAMP_KEPT = "nothing was installed (.venv/.installed, if any, is left as it was)"
REQUIREMENTS = {"gpu": "requirements-gpu.txt", "cpu": "requirements-cpu.txt"}


def lists_a_gpu(returncode: int | None, output: str) -> bool:
    """Whether `nvidia-smi -L` ran and listed at least one GPU ('GPU 0: NVIDIA A100 ...
    (UUID: ...)')."""
    return returncode == 0 and any(line.strip().startswith("GPU ") for line in output.splitlines())


def choose(gpu: str, returncode: int | None, output: str) -> str:
    """'gpu' or 'cpu' from the GPU variable and what `nvidia-smi -L` said (returncode None: not
    found)."""
    if gpu not in CHOICES:
        raise ValueError(
            f"invalid GPU={gpu!r}: use auto (install the GPU builds when nvidia-smi lists a "
            "GPU), 1 (always) or 0 (never)"
        )
    if gpu != "auto":
        return "gpu" if gpu == "1" else "cpu"
    return "gpu" if lists_a_gpu(returncode, output) else "cpu"


def nvidia_smi(*args: str) -> tuple[int | None, str]:
    """(returncode, stdout) of `nvidia-smi ARGS`; (None, '') where it is absent or hangs."""
    if not shutil.which("nvidia-smi"):
        return None, ""
    try:
        done = subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None, ""
    return done.returncode, done.stdout


def nvidia_smi_list() -> tuple[int | None, str]:
    return nvidia_smi("-L")


def driver_version() -> str | None:
    """The NVIDIA driver's version ('575.57.08') as nvidia-smi reports it; None without a driver."""
    returncode, out = nvidia_smi("--query-gpu=driver_version", "--format=csv,noheader")
    versions = [line.strip() for line in out.splitlines() if re.match(r"^\d+\.", line.strip())]
    return versions[0] if returncode == 0 and versions else None


def driver_problem(version: str | None) -> str | None:
    """Why this driver cannot run the pinned CUDA 13 wheels, or None (unknown drivers pass)."""
    if version is None or int(version.split(".")[0]) >= DRIVER_NEEDED:
        return None
    return (
        f"NVIDIA driver {version} is older than R{DRIVER_NEEDED}, which the pinned CUDA "
        f"{CUDA_MAJOR} builds need (torch 2.13.0, onnxruntime-gpu: requirements-gpu.txt); on it "
        "torch sees no GPU and ONNX Runtime's CUDA provider does not load"
    )


def check(gpu: str, version: str | None) -> str | None:
    """The message that stops `make install` (None: go on): the GPU builds on a driver too old, or
    GPU=1 where no NVIDIA driver lists a GPU (they could not run here, and pip would fail half-way
    on a package PyPI does not serve)."""
    listed = nvidia_smi_list() if gpu != "0" else (None, "")
    kind = choose(gpu, *listed)
    if kind == "gpu" and not lists_a_gpu(*listed):
        return (
            f"make install stopped: GPU={gpu} asks for the GPU builds (requirements-gpu.txt), but "
            "`nvidia-smi -L` lists no GPU here (no NVIDIA driver): they could not run on this "
            f"host, and tensorrt-cu13-libs is fetched from NVIDIA's index ({NVIDIA_INDEX}), which "
            "a plain PyPI mirror does not serve. Choices: `make install GPU=0` (the CPU builds), "
            f"or `make install GPU=1` on the GPU host; {STAMP_KEPT}"
        )
    problem = driver_problem(version) if kind == "gpu" else None
    if problem is None:
        return None
    return (
        f"make install stopped: {problem}. Choices: (1) update the NVIDIA driver to "
        f"R{DRIVER_NEEDED} or newer, then `make install` again; (2) `make install GPU=0`: the CPU "
        "builds, the GPU is not measured; (3) `make install GPU=0`, then CUDA 12 builds of torch "
        "and onnxruntime-gpu by hand (docs/backends.md, NVIDIA GPUs)"
    )


def pip_failed(kind: str, log: Path) -> str:
    """The one line `make install` ends with when pip could not install `kind`'s requirements: pip's
    last error, where its full output is, and for the GPU builds the index they need."""
    try:
        errors = [
            line.strip()
            for line in log.read_text(errors="replace").splitlines()
            if line.startswith("ERROR")
        ]
    except OSError:
        errors = []
    why = f" ({errors[-1]})" if errors else ""
    need = (
        f"; tensorrt-cu13-libs is fetched from NVIDIA's index ({NVIDIA_INDEX}), which a plain PyPI "
        f"mirror does not serve: let pip reach it (PIP_EXTRA_INDEX_URL={NVIDIA_INDEX} make install "
        "GPU=1) or `make install GPU=0`"
        if kind == "gpu"
        else ""
    )
    return (
        f"make install stopped: pip could not install {REQUIREMENTS[kind]}{why}; its output is in "
        f"{log}{need}; .venv/.installed (if any) is left as it was"
    )


# ----------------------------------------------------------- one ONNX Runtime build (venv's python)


def pinned(kind: str, root: Path = ROOT) -> str:
    """The requirement line of `kind`'s ONNX Runtime build in its requirements file."""
    name = ORT_BUILDS[kind]
    for line in (root / REQUIREMENTS[kind]).read_text().splitlines():
        line = line.split("#")[0].strip()
        if re.match(rf"^{re.escape(name)}\s*(==|>=|~=|$)", line):
            return line
    raise ValueError(f"{REQUIREMENTS[kind]} names no {name} requirement")


def files_missing(name: str) -> bool:
    """Whether distribution `name` is installed but some of its Python files are gone (the other
    ORT build's uninstall deleted the shared `onnxruntime/` files)."""
    dist = importlib.metadata.distribution(name)
    return any(
        f.suffix == ".py" and not Path(str(dist.locate_file(f))).exists() for f in dist.files or ()
    )


def installed(name: str) -> bool:
    try:
        importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def onnxruntime_steps(kind: str, root: Path = ROOT) -> list[list[str]]:
    """pip commands that leave `kind`'s ORT build alone in this environment, its files intact."""
    wanted, other = ORT_BUILDS[kind], ORT_BUILDS["cpu" if kind == "gpu" else "gpu"]
    steps = []
    if installed(other):
        steps.append(["uninstall", "-y", other])
    if steps or not installed(wanted) or files_missing(wanted):
        steps.append(
            [
                "install",
                "--force-reinstall",
                "--no-deps",
                pinned(kind, root),
                "-c",
                str(root / "constraints.txt"),
            ]
        )
    return steps


def fix_onnxruntime(kind: str) -> int:
    for step in onnxruntime_steps(kind):
        done = subprocess.run([sys.executable, "-m", "pip", "-q", *step])
        if done.returncode:
            return done.returncode
    return 0


def main(argv: list[str]) -> int:
    args = argv[1:]
    try:
        if args[:1] == ["onnxruntime"]:
            if args[1:] not in (["gpu"], ["cpu"]):
                raise ValueError(
                    f"invalid build {' '.join(args[1:])!r}: use `onnxruntime gpu` or `onnxruntime "
                    "cpu`"
                )
            return fix_onnxruntime(args[1])
        if args[:1] == ["pip-failed"] and len(args) == 3 and args[1] in REQUIREMENTS:
            print(pip_failed(args[1], Path(args[2])), file=sys.stderr)
            return 1
        if args[:1] == ["check"]:
            message = check(args[1] if len(args) > 1 else "auto", driver_version())
            print(message or "", file=sys.stderr, end="\n" if message else "")
            return 1 if message else 0
        gpu = args[0] if args else "auto"
        kind = choose(gpu, *nvidia_smi_list()) if gpu == "auto" else choose(gpu, None, "")
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    print(kind)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
