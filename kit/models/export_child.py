"""Run one export in a child process: the framework and its copies of the weights die with it.

The parent passes the job as JSON on the command line and reads the export's metadata (or the
error) back from a JSON file. The child records its own peak RSS (VmHWM) in the metadata's
`verification`; when the kernel kills it, the error names the peak read from outside (`run_child`).

    python -m kit.models.export_child '{"model": ..., "result": ...}'
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from kit import errors
from kit.cache import temporaries_of, write_entry
from kit.measure.memory import (
    InsufficientMemory,
    Peak,
    child_peak,
    oom_message,
    own_peak_rss_bytes,
    running_peak_rss_bytes,
)
from kit.models.build import build_export
from kit.models.spec import ModelEntry, WeightsInfo
from kit.models.zoo import MODELS
from kit.paths import cache_dir

PEAK_POLL_S = 0.02  # how often a running export's VmHWM is read (an export takes seconds)
STDERR_TAIL = 3000  # characters of the child's stderr quoted in an error
TEMP_PREFIX = "kit-export-"  # + the pid of the process that made it: $TMPDIR/kit-export-<pid>-*


def run_export_child(
    entry: ModelEntry,
    weights: WeightsInfo,
    weights_path: Path | None,
    *,
    small: bool,
    seed: int,
    opset: int,
    onnx_path: Path,
    env: Mapping[str, str] | None = None,
) -> dict:
    """Export `entry` in a child process; its metadata, or the child's error raised here."""
    with tempfile.TemporaryDirectory(prefix=f"{TEMP_PREFIX}{os.getpid()}-") as tmp:
        result = Path(tmp) / "result.json"
        job = {
            "model": entry.name,
            "weights": weights.to_dict(),
            "small": small,
            "seed": seed,
            "opset": opset,
            "onnx_path": str(onnx_path),
            "result": str(result),
            "weights_path": None if weights_path is None else str(weights_path),
        }
        with open(Path(tmp) / "stderr.txt", "w+") as stderr:
            status, peak = run_child(
                [sys.executable, "-m", "kit.models.export_child", json.dumps(job)],
                child_environment(env or {}),
                stderr,
            )
            stderr.seek(0)
            tail = stderr.read()[-STDERR_TAIL:]
        outcome = json.loads(result.read_text()) if result.exists() else None
    if outcome and "meta" in outcome:
        return outcome["meta"]
    what = f"export of {entry.name}{' (small)' if small else ''}"
    if outcome and "error" in outcome:
        raise error_from(outcome["error"], outcome["message"], what)
    raise child_failure(what, status, peak, tail)


def child_failure(what: str, status: int, peak: Peak, tail: str) -> errors.KitError:
    """The error for a child that died without a word: killed (out of memory when its peak came
    near the limit) or crashed."""
    if status == -signal.SIGKILL:
        return errors.KitError(oom_message(f"{what} was killed", peak))
    if status < 0:
        return errors.KitError(
            f"{what} was killed by {signal.Signals(-status).name}; its output ends:\n{tail}"
        )
    return errors.KitError(
        f"{what} failed in its child process (exit status {status}); its output ends:\n{tail}"
    )


def child_environment(extra: Mapping[str, str]) -> dict[str, str]:
    """This process's environment, with this checkout's `kit` first on the path."""
    root = str(Path(__file__).resolve().parents[2])
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, **dict(extra)}


def run_child(argv: list[str], env: Mapping[str, str], stderr) -> tuple[int, Peak]:
    """(exit status, negative for a signal; the child's own peak RSS).

    wait4's ru_maxrss also counts this process's RSS at the spawn, so the child's VmHWM is read
    while it runs too (`child_peak` decides which one holds).
    """
    proc = subprocess.Popen(argv, env=dict(env), stdout=stderr, stderr=stderr)
    seen = 0
    try:
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            seen = max(seen, running_peak_rss_bytes(proc.pid) or 0)
            time.sleep(PEAK_POLL_S)
    except BaseException:  # Ctrl-C: the child goes too
        proc.kill()
        proc.wait()
        raise
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, child_peak(usage.ru_maxrss * 1024, seen)


def exit_on_sigterm() -> None:
    """SIGTERM (how the batch stops a process tree) raises SystemExit(143) here, so every
    `finally` runs: no temporary file or folder is left behind, nothing half-made at a final
    name."""
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))


def remove_leftovers(pids: Iterable[int], cache: Path | None = None) -> list[Path]:
    """Delete what processes `pids`, killed before their own cleanup ran, left behind: their
    `kit-export-<pid>-*` folders in the temporary directory and their temporary files in the
    cache; returns what was deleted."""
    pids = list(pids)
    folders = [d for pid in pids for d in Path(tempfile.gettempdir()).glob(f"{TEMP_PREFIX}{pid}-*")]
    files = temporaries_of(cache or cache_dir(), pids)
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)
    for file in files:
        file.unlink(missing_ok=True)
    return folders + files


ERROR_TYPES = {
    cls.__name__: cls
    for cls in (
        errors.CorruptModel,
        errors.MissingResource,
        errors.BackendUnavailable,
        errors.KitError,
        InsufficientMemory,
    )
}


def error_from(kind: str, message: str, what: str) -> errors.KitError:
    """The child's error as the same KitError class here (others become KitError, named)."""
    if kind in ERROR_TYPES:
        return ERROR_TYPES[kind](message)
    return errors.KitError(f"{what} failed: {kind}: {message}")


def main(argv: list[str]) -> int:
    exit_on_sigterm()
    job = json.loads(argv[0])
    result = Path(job["result"])
    try:
        meta = build_export(
            MODELS.get(job["model"]),
            WeightsInfo.from_dict(job["weights"]),
            None if job["weights_path"] is None else Path(job["weights_path"]),
            small=job["small"],
            seed=job["seed"],
            opset=job["opset"],
            onnx_path=Path(job["onnx_path"]),
        )
    except Exception as exc:  # noqa: BLE001 - every failure goes back to the parent, named
        result.write_text(json.dumps({"error": type(exc).__name__, "message": str(exc)}))
        raise
    meta["verification"]["export_peak_rss_bytes"] = own_peak_rss_bytes()
    meta = write_entry(Path(job["onnx_path"]), meta)
    result.write_text(json.dumps({"meta": meta}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
