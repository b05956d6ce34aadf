"""Content-keyed file caches: exports, conversions, compiled PopEFs.

An entry is an artifact file plus a JSON sidecar (same stem, `.json`) recording what it was made
from, its size and its content hash (sha256). The key is a hash of the sources' *content* and the
settings, so replacing a model at the same path makes a new entry. A damaged entry (unreadable
JSON, missing, truncated or replaced artifact) is deleted and rebuilt, with a `CacheRebuilt` warning
saying why. Artifacts are built under a temporary name and renamed into place after their metadata
(`commit`), so a failed or interrupted build leaves nothing at the final name.

    path = cached_file(directory, "model-fp16", ".onnx", sources=[onnx_path],
                       settings={"method": "fp16", "ort": "1.31"}, build=convert)
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from kit import atomic
from kit.errors import KitError

KEY_LENGTH = 12
_DIGESTS: dict[tuple, str] = {}  # (path, inode, size, mtime) -> sha256, within one process


class CacheRebuilt(UserWarning):
    """A damaged cache entry was deleted and is being rebuilt."""


def file_digest(path: Path) -> str:
    """sha256 of a file's content (memoised per process on inode, size and mtime)."""
    path = Path(path)
    st = path.stat()
    memo = (str(path.resolve()), st.st_ino, st.st_size, st.st_mtime_ns)
    if memo not in _DIGESTS:
        with open(path, "rb") as f:
            _DIGESTS[memo] = hashlib.file_digest(f, "sha256").hexdigest()
    return _DIGESTS[memo]


def content_key(sources: Sequence[Path] = (), settings: Mapping | Sequence = ()) -> str:
    """Short hash of the sources' content (files, or every file under a directory) and settings."""
    h = hashlib.sha256()
    for source in sources:
        source = Path(source)
        files = sorted(p for p in source.rglob("*") if p.is_file()) if source.is_dir() else [source]
        for f in files:
            h.update(
                f"{f.relative_to(source) if source.is_dir() else ''}:{file_digest(f)}|".encode()
            )
    h.update(json.dumps(settings, sort_keys=True, default=str).encode())
    return h.hexdigest()[:KEY_LENGTH]


def meta_path(artifact: Path) -> Path:
    return Path(artifact).with_suffix(".json")


def discard(artifact: Path, reason: str) -> None:
    """Delete a damaged entry and say so."""
    artifact = Path(artifact)
    warnings.warn(
        CacheRebuilt(f"cache entry {artifact.name} {reason}; rebuilding it"), stacklevel=3
    )
    artifact.unlink(missing_ok=True)
    meta_path(artifact).unlink(missing_ok=True)


def entry_problem(artifact: Path) -> tuple[dict | None, str | None]:
    """(metadata, None) for an intact entry, (None, reason) for a damaged one, (None, None) if
    absent."""
    artifact, meta_file = Path(artifact), meta_path(artifact)
    if not artifact.exists() and not meta_file.exists():
        return None, None
    if not meta_file.exists():
        return None, "has no metadata file"
    try:
        meta = json.loads(meta_file.read_text())
        recorded = meta["artifact_bytes"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return None, f"has unreadable metadata ({type(exc).__name__}: {exc})"
    if not artifact.exists():
        return None, "has metadata but no file"
    size = artifact.stat().st_size
    if size != recorded:
        return None, f"is {size} bytes where {recorded} were written (truncated or replaced)"
    digest = meta.get("artifact_sha256")
    if digest is not None and file_digest(artifact) != digest:
        return (
            None,
            f"has content sha256 {file_digest(artifact)[:12]}... where {digest[:12]}... was "
            "written (replaced)",
        )
    return meta, None


def read_entry(artifact: Path) -> dict | None:
    """The metadata of an intact entry; None if absent or damaged (damaged ones are deleted)."""
    meta, problem = entry_problem(artifact)
    if problem:
        discard(artifact, problem)
    elif meta is not None and "artifact_sha256" not in meta:  # written before hashes were recorded
        meta = write_entry(artifact, meta)
    return meta


def write_entry(artifact: Path, meta: Mapping) -> dict:
    """Record an artifact that is now in place (its size and content hash are checked on every
    later read)."""
    record = {
        **meta,
        "artifact_bytes": Path(artifact).stat().st_size,
        "artifact_sha256": file_digest(artifact),
    }
    atomic.write_text(meta_path(artifact), json.dumps(record, indent=1))
    return record


def temporary_path(artifact: Path) -> Path:
    """A per-process name beside `artifact` (same filesystem, so the final rename is atomic)."""
    artifact = Path(artifact)
    return artifact.with_name(f".{artifact.stem}.{os.getpid()}.tmp{artifact.suffix}")


_TEMPORARY_PID = re.compile(r"\.(\d+)\.tmp")  # temporary_path's `.<stem>.<pid>.tmp<suffix>`


def temporaries_of(directory: Path, pids: Iterable[int]) -> list[Path]:
    """The temporary files (`temporary_path`, and files named after one) that processes `pids`
    left under `directory`: a build killed before its own cleanup ran."""
    pids = set(pids)
    found = []
    for path in Path(directory).rglob(".*.tmp*") if Path(directory).is_dir() else ():
        owners = _TEMPORARY_PID.findall(path.name)
        if owners and int(owners[-1]) in pids and path.is_file():
            found.append(path)
    return found


@contextlib.contextmanager
def building(artifact: Path) -> Iterator[Path]:
    """Yield a temporary path to build into; the builder puts it in place with `commit`, its
    metadata included, as the block's last step. Whatever is left at the temporary name (a
    failed or interrupted build, ONNX external data, a pre-processed copy: files beside it with its
    name as a prefix) is removed on the way out, so nothing is ever at the final name half-made.
    """
    artifact = Path(artifact)
    artifact.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_path(artifact)
    try:
        yield tmp
        if not artifact.exists():
            raise KitError(f"building {artifact.name} wrote nothing")
    finally:
        for leftover in artifact.parent.glob(f"{tmp.stem}*"):
            leftover.unlink(missing_ok=True)


def commit(tmp: Path, artifact: Path, meta: Mapping) -> dict:
    """Put the file built at `tmp` in place as `artifact` with its metadata (size and content hash
    read from `tmp`): the metadata first, then the file renamed, so the artifact is never at its
    final name without it (an interruption between leaves metadata whose file is missing: a
    damaged entry, discarded and rebuilt by the next read). Returns the metadata."""
    tmp, artifact = Path(tmp), Path(artifact)
    if not tmp.exists():
        raise KitError(f"building {artifact.name} wrote nothing")
    record = {**meta, "artifact_bytes": tmp.stat().st_size, "artifact_sha256": file_digest(tmp)}
    atomic.write_text(meta_path(artifact), json.dumps(record, indent=1))
    try:
        tmp.replace(artifact)
    except BaseException:
        meta_path(artifact).unlink(missing_ok=True)
        raise
    return record


def cached_file(
    directory: Path,
    stem: str,
    suffix: str,
    *,
    sources: Sequence[Path],
    settings: Mapping,
    build: Callable[[Path], Mapping | None],
) -> Path:
    """The file `build(tmp_path)` makes from `sources` with `settings`, built once per content key.

    `build` writes the artifact at the path it is given and may return extra metadata to record.
    """
    key = content_key(sources, settings)
    artifact = Path(directory) / f"{stem}-{key}{suffix}"
    if read_entry(artifact) is not None:
        return artifact
    with building(artifact) as tmp:
        extra = build(tmp) or {}
        commit(
            tmp,
            artifact,
            {
                "key": key,
                "settings": dict(settings),
                **dict(extra),
                "sources": [
                    {"name": Path(s).name, "sha256": file_digest(s)}
                    for s in sources
                    if Path(s).is_file()
                ],
            },
        )
    return artifact


def prune_oldest(directory: Path, pattern: str, cap_bytes: int, keep: int = 1) -> list[Path]:
    """Delete the least recently written files matching `pattern` in `directory` until they total at
    most `cap_bytes`, never the `keep` newest (the one just written); returns what was deleted. A
    file another process removed first is skipped; one being read survives its unlinking (POSIX)."""
    files = []
    for path in Path(directory).glob(pattern):
        with contextlib.suppress(OSError):
            st = path.stat()
            files.append((st.st_mtime_ns, st.st_size, path))
    files.sort()  # oldest first
    total = sum(size for _, size, _ in files)
    deleted = []
    for _, size, path in files[: max(0, len(files) - keep)]:
        if total <= cap_bytes:
            break
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            deleted.append(path)
        total -= size
    return deleted
