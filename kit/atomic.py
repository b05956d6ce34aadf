"""Atomic file writes: readers see the old file or the new one, never a half-written one.

Each write goes to a uniquely named temporary file in the same folder, then `os.replace`s the
target, so two processes writing the same file never share a temporary name.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_bytes(path: Path, data: bytes) -> Path:
    """Write `data` to `path` atomically (unique temporary file, fsync, rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except OSError as exc:  # a full disk, a quota: name the file being written, not its temporary
        Path(tmp).unlink(missing_ok=True)
        raise type(exc)(exc.errno, exc.strerror, str(path)) from exc
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_text(path: Path, text: str) -> Path:
    """Write UTF-8 `text` to `path` atomically."""
    return write_bytes(path, text.encode("utf-8"))
