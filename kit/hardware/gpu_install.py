"""Which build `make install` installs: the GPU builds where an NVIDIA driver lists a GPU.

The Makefile runs this file with the system Python before the virtual environment exists, so it
uses the standard library only. It prints `gpu` or `cpu`:

    python3 kit/hardware/gpu_install.py auto   # gpu when `nvidia-smi -L` lists a GPU, else cpu
    python3 kit/hardware/gpu_install.py 1      # gpu (GPU=1), e.g. to prepare an environment for a GPU host
    python3 kit/hardware/gpu_install.py 0      # cpu (GPU=0): today's install, whatever the machine has

`gpu` adds requirements-gpu.txt (onnxruntime-gpu instead of onnxruntime) after the usual install.
"""

from __future__ import annotations

import shutil
import subprocess
import sys

CHOICES = ("auto", "0", "1")


def lists_a_gpu(returncode: int | None, output: str) -> bool:
    """Whether `nvidia-smi -L` ran and listed at least one GPU ('GPU 0: NVIDIA A100 ... (UUID: ...)')."""
    return returncode == 0 and any(line.strip().startswith("GPU ") for line in output.splitlines())


def choose(gpu: str, returncode: int | None, output: str) -> str:
    """'gpu' or 'cpu' from the GPU variable and what `nvidia-smi -L` said (returncode None: not found)."""
    if gpu not in CHOICES:
        raise ValueError(f"invalid GPU={gpu!r}: use auto (install the GPU builds when nvidia-smi lists a "
                         "GPU), 1 (always) or 0 (never)")
    if gpu != "auto":
        return "gpu" if gpu == "1" else "cpu"
    return "gpu" if lists_a_gpu(returncode, output) else "cpu"


def nvidia_smi_list() -> tuple[int | None, str]:
    """(returncode, stdout) of `nvidia-smi -L`; (None, '') where it is absent or hangs."""
    if not shutil.which("nvidia-smi"):
        return None, ""
    try:
        done = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None, ""
    return done.returncode, done.stdout


def main(argv: list[str]) -> int:
    gpu = argv[1] if len(argv) > 1 else "auto"
    try:
        kind = choose(gpu, *nvidia_smi_list()) if gpu == "auto" else choose(gpu, None, "")
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    print(kind)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
