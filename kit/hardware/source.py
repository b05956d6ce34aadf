"""Which kit and which software made a figure: the kit's git commit (dirty or not, with the hash of
the local changes), every installed distribution with its version, and content hashes of files.

The installed distributions come from `importlib.metadata`; the commit from git itself (the only
reader of a work tree), or the installed package's version when the kit runs without git.

>>> len(file_sha256(__file__)), sha256_bytes(b"") [:12]
(64, 'e3b0c44298fc')
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from kit.paths import published_dir

#: The kit's own source tree: the folder holding the `kit` package that is running.
KIT_TREE = Path(__file__).resolve().parents[2]
GIT_TIMEOUT_S = 20
DISTRIBUTION = "ipu-repro"
#: The environment variable through which the batch's worker tells a notebook's kernel its job
#: (kit.batch.executor.Task.provenance, as JSON).
JOB_ENV = "KIT_JOB"
INTERACTIVE = (
    "not started by `kit reproduce` (an interactive or hand-made run): its parameters are "
    "the result's own (`parameters`); `kit rerun` needs a batch result"
)


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_sha256(path: str | Path) -> str:
    """The SHA-256 of a file's content, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _git(*args: str) -> bytes | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(KIT_TREE), *args],
            capture_output=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


@functools.cache
def kit_source() -> dict:
    """The kit that is running: {"commit", "dirty", "diff_sha256", "untracked", "version", "how"}.

    `dirty` is True when tracked files differ from the commit or untracked (not ignored) files
    exist; `diff_sha256` hashes `git diff HEAD --binary` plus every untracked file's name and
    content, so two trees with the same commit and the same hash hold the same source. Without
    git (an installed copy) only the distribution's version is known: commit and dirty are None.
    """
    version = _distribution_version()
    commit = _git("rev-parse", "HEAD")
    if commit is None:
        return {
            "commit": None,
            "dirty": None,
            "diff_sha256": None,
            "untracked": [],
            "version": version,
            "how": f"no git work tree at {KIT_TREE}: the installed {DISTRIBUTION} version only",
        }
    diff = _git("diff", "HEAD", "--binary") or b""
    untracked = sorted(
        (_git("ls-files", "--others", "--exclude-standard", "-z") or b"")
        .decode(errors="replace")
        .split("\0")
    )
    untracked = [name for name in untracked if name]
    h = hashlib.sha256(diff)
    for name in untracked:
        h.update(name.encode())
        path = KIT_TREE / name
        h.update(file_sha256(path).encode() if path.is_file() else b"")
    dirty = bool(diff) or bool(untracked)
    return {
        "commit": commit.decode().strip(),
        "dirty": dirty,
        "diff_sha256": h.hexdigest() if dirty else None,
        "untracked": untracked,
        "version": version,
        "how": f"git at {KIT_TREE}: HEAD, `git diff HEAD --binary` and the untracked files",
    }


def _distribution_version() -> str | None:
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None


def normalized(name: str) -> str:
    """A distribution's name as PEP 503 compares them: `Tensorflow_CPU` is `tensorflow-cpu`."""
    return re.sub(r"[-_.]+", "-", name).lower().strip()


def distributions() -> dict[str, str]:
    """Every installed distribution on this interpreter's path, normalized name -> version, sorted
    (the first found wins where a name is installed twice, as `import` would find it). Copies that
    another package vendors (setuptools puts its `_vendor` folder on sys.path once pkg_resources is
    imported) are not installed distributions: whether a process imported pkg_resources must not
    change the list."""
    found: dict[str, str] = {}
    for dist in importlib.metadata.distributions(
        path=[p for p in sys.path if "_vendor" not in Path(p).parts]
    ):
        name = normalized(dist.metadata["Name"] or "")
        if name and name not in found:
            found[name] = dist.version
    return dict(sorted(found.items()))


def job() -> dict:
    """The batch job this process runs (set by kit.batch.worker in JOB_ENV), or what an
    interactive run records instead: {"rerun": None, "how": ...}."""
    raw = os.environ.get(JOB_ENV)
    if not raw:
        return {"rerun": None, "how": INTERACTIVE}
    try:
        found = json.loads(raw)
    except json.JSONDecodeError:
        return {"rerun": None, "how": f"{JOB_ENV} is not JSON: {raw[:80]!r}"}
    return (
        found
        if isinstance(found, dict)
        else {"rerun": None, "how": f"{JOB_ENV} is not a JSON object"}
    )


def published_data_hashes() -> dict[str, str]:
    """SHA-256 of every file under data/published/, by its path relative to that folder."""
    root = published_dir()
    if not root.is_dir():
        return {}
    return {
        p.relative_to(root).as_posix(): file_sha256(p)
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }
