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
from collections.abc import Mapping, MutableMapping

from kit.paths import cache_dir

CACHES = {"TORCHINDUCTOR_CACHE_DIR": "inductor", "TRITON_CACHE_DIR": "triton"}


def compile_caches(
    torch_version: str, device: str, env: MutableMapping[str, str] | None = None
) -> dict[str, str]:
    """Set each cache's variable in `env` (this process's environment) where it is not set, or
    holds torch's own default (importing torch._dynamo or torch._inductor writes that default into
    the environment: an export, or the kit's own counters, had already done it before the first
    compile, which then kept its graphs in $TMPDIR/torchinductor_<user>), before the compile reads
    it; returns the folders in use."""
    env = os.environ if env is None else env
    key = re.sub(r"[^A-Za-z0-9._+-]+", "_", f"{torch_version}-{device}").strip("_")
    base = cache_dir() / "torch-compile" / key
    for var, sub in CACHES.items():
        if env.get(var) in (None, torch_default(var)):
            env[var] = str(base / sub)
    return {var: env[var] for var in CACHES}


def torch_default(var: str) -> str | None:
    """The folder torch puts in the environment as `var` when none was chosen (None: it puts
    none there)."""
    if var != "TORCHINDUCTOR_CACHE_DIR":
        return None
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    return os.path.abspath(default_cache_dir())


#: inductor's FX graph cache outcomes, as its counters name them
FX_GRAPH_CACHE = {
    "hit": "fxgraph_cache_hit",
    "miss": "fxgraph_cache_miss",
    "bypass": "fxgraph_cache_bypass",
}


def fx_graph_cache_counts() -> dict[str, int]:
    """How many graphs this process found in inductor's FX graph cache so far (hit), compiled and
    stored (miss) or compiled without it (bypass: mkldnn-packed weights on a CPU, for one)."""
    from torch._dynamo.utils import counters

    return {outcome: counters["inductor"][name] for outcome, name in FX_GRAPH_CACHE.items()}


def read_from_cache(counts: Mapping[str, int] | None) -> bool:
    """Whether a compile's graphs all came from inductor's cache (what an earlier compile of the
    same graph left, kit.search.ahead's among them): hits, and nothing compiled.

    >>> read_from_cache({"hit": 1, "miss": 0, "bypass": 0}), read_from_cache({"hit": 1, "miss": 1})
    (True, False)
    >>> read_from_cache(None)
    False
    """
    counts = counts or {}
    return counts.get("hit", 0) > 0 and not counts.get("miss", 0) and not counts.get("bypass", 0)
