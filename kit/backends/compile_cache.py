"""Where torch.compile keeps what it compiled: inductor's and Triton's caches under the kit's own
cache folder (outputs/cache/torch-compile/<torch version>-<device>/), so a warm rerun reuses a cold
run's kernels, `kit clean-outputs` clears them with the rest, and another torch or device never
reads them. An environment that names its own (TORCHINDUCTOR_CACHE_DIR, TRITON_CACHE_DIR) keeps it.

>>> import os, tempfile
>>> from pathlib import Path
>>> os.environ["KIT_CACHE"] = tempfile.mkdtemp()
>>> dirs = compile_caches("2.11.0+cu130", "NVIDIA H200", env={})
>>> [str(Path(d).relative_to(os.environ["KIT_CACHE"])) for d in dirs.values()]
['torch-compile/2.11.0+cu130-NVIDIA_H200/inductor', 'torch-compile/2.11.0+cu130-NVIDIA_H200/triton']
>>> compile_caches("2.11.0+cu130", "NVIDIA H200", env={"TRITON_CACHE_DIR": "/mine"})["TRITON_CACHE_DIR"]
'/mine'
"""  # noqa: E501

from __future__ import annotations

import os
import re
from collections.abc import MutableMapping

from kit.paths import cache_dir

CACHES = {"TORCHINDUCTOR_CACHE_DIR": "inductor", "TRITON_CACHE_DIR": "triton"}


def compile_caches(
    torch_version: str, device: str, env: MutableMapping[str, str] | None = None
) -> dict[str, str]:
    """Set each cache's variable in `env` (this process's environment) where it is not set, before
    the first compile reads it; returns the folders in use."""
    env = os.environ if env is None else env
    key = re.sub(r"[^A-Za-z0-9._+-]+", "_", f"{torch_version}-{device}").strip("_")
    base = cache_dir() / "torch-compile" / key
    for var, sub in CACHES.items():
        env.setdefault(var, str(base / sub))
    return {var: env[var] for var in CACHES}
