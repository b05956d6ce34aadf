"""Emptying outputs/ (`make clean-outputs`), only while no batch holds it.

The batch lock lives in outputs/ itself, so cleaning must take it first and leave it in place:
deleting it under a running batch would let a second batch start beside the first.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from kit.batch.lock import LOCK_FILE, OWNER_FILE, outputs_lock

KEPT = frozenset({LOCK_FILE, OWNER_FILE, ".gitkeep"})


def clean_outputs(out: Path) -> int:
    """Remove everything under `out` but the lock and .gitkeep; returns how many entries went.
    Raises OutputsBusy (and removes nothing) while a batch or another command holds `out`."""
    removed = 0
    with outputs_lock(out, command="kit clean-outputs"):
        for path in sorted(out.iterdir()):
            if path.name in KEPT:
                continue
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
            removed += 1
    return removed
