"""Peak memory of every export and ONNX Runtime conversion against the 3x file size + 2 GB target.

For each model (knob BENCH_MEMORY_MODELS, default every zoo entry; "small" variants with
BENCH_MEMORY_SMALL=1) the export, the fp16 conversion and the int8 quantization (calibration
included) each run in a fresh child process against a fresh cache, one at a time. A step's peak
is the highest VmHWM (peak resident set since exec) of the processes doing the work: the step's
process and, for an export, the export's own child. Printed per step: peak, wall time, ONNX file
size, peak / file size, and the peak against the target (3 x file + 2 GB, and no step over 8 GB).
BENCH_STRICT=1 makes a missed target a failing exit status. Timings are noisy on a shared machine.

Where the IPU backend is available (PopRT, or its test double: rows then say "[not run on an IPU]"),
each model's PopRT conversion + compilation is measured too, at the first published IPU batch size
and fp16: its peak is the larger of the two steps' peaks in the PopRT worker
(kit.backends.ipu.backend). Elsewhere the bench says why that step is not measured.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import env_list, load_note, strict

GB = 1e9
CEILING = 8 * GB
STEPS = ("export", "fp16", "int8")


def target_bytes(model_bytes: float) -> float:
    from kit.measure.memory import conversion_budget

    return conversion_budget(model_bytes)


def run_step(step: str, model: str, cache: Path, small: bool) -> dict:
    """Run one step in a child process; its JSON line (peak, file size) plus the wall time."""
    started = time.perf_counter()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.memory",
            "--step",
            step,
            model,
            str(cache),
            "1" if small else "0",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "KIT_CACHE": str(cache)},
    )
    wall = time.perf_counter() - started
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"error": (proc.stderr.strip().splitlines() or ["no output"])[-1], "wall_s": wall}
    return {**json.loads(lines[-1]), "wall_s": wall}


def child(step: str, model: str, small: bool) -> None:
    """Inside the step's process: do the step, print what it measured."""
    from kit.backends import export_opset
    from kit.measure.memory import own_peak_rss_bytes
    from kit.models import export_model

    exported = export_model(
        model, small=small, opset=export_opset("ipu" if step == "ipu" else "onnxruntime")
    )
    peak = own_peak_rss_bytes()
    if step == "export":
        peak = max(peak, exported.verification.get("export_peak_rss_bytes") or 0)
        path = exported.onnx_path
    elif step == "ipu":
        print(json.dumps(ipu_step(exported)))
        return
    else:
        from kit.backends.onnx_conversion import convert_for_ort

        before = own_peak_rss_bytes()  # loading the cached export's metadata: next to nothing
        path = convert_for_ort(exported, step)
        peak = max(before, own_peak_rss_bytes())
    print(
        json.dumps(
            {
                "peak_bytes": peak,
                "model_bytes": exported.onnx_path.stat().st_size,
                "output_bytes": Path(path).stat().st_size,
            }
        )
    )


def ipu_step(exported) -> dict:
    """PopRT conversion + compilation in the worker, at fp16 and the first published batch size; no
    pack check (it runs the packed model, minutes a sample on the double's CPU, and is no
    conversion)."""
    from kit.backends import BackendConfig, require_backend
    from kit.published import figures as published

    batch = (published.ipu_run_settings(exported.name, "FP16")["batch_sizes"] or [1])[0]
    with tempfile.TemporaryDirectory(prefix="kit-bench-popef-") as popef:
        session = require_backend("ipu").load(
            exported,
            BackendConfig("fp16", "ipu", options={"cache_dir": popef, "pack_check": False}),
            batch,
        )
        memory, emulated = session.description["memory"], session.description.get("emulated", False)
        session.close()
    steps = memory.get("steps") or {}
    return {
        "peak_bytes": max((f.get("peak_rss_bytes") or 0) for f in steps.values()) if steps else 0,
        "model_bytes": exported.onnx_path.stat().st_size,
        "note": "[not run on an IPU]" if emulated else "",
        "detail": ", ".join(
            f"{s} {(f.get('peak_rss_bytes') or 0) / GB:.2f} GB" for s, f in steps.items()
        ),
    }


def ipu_unavailable() -> str | None:
    from kit.backends import get_backend

    return get_backend("ipu").availability()


def measure(models: list[str], small: bool) -> list[dict]:
    rows = []
    ipu_reason = ipu_unavailable()
    steps = STEPS if ipu_reason else (*STEPS, "ipu")
    if ipu_reason:
        print(f"  ipu (PopRT conversion + compilation): not measured here: {ipu_reason}")
    for model in models:
        with tempfile.TemporaryDirectory(prefix="kit-bench-memory-") as cache:
            for step in steps:
                row = {"model": model, "step": step, **run_step(step, model, Path(cache), small)}
                rows.append(row)
                print(format_row(row), flush=True)
                if step == "export" and "error" in row:
                    break
    return rows


def format_row(row: dict) -> str:
    head = f"  {row['model']:<28}{row['step']:<7}"
    if "error" in row:
        return f"{head}FAILED after {row['wall_s']:.0f} s: {row['error']}"
    peak, size = row["peak_bytes"], row["model_bytes"]
    verdict = "ok" if within_target(row) else "OVER"
    extra = " ".join(x for x in (row.get("detail"), row.get("note")) if x)
    return (
        f"{head}{peak / GB:>7.2f} GB {row['wall_s']:>7.0f} s {size / 1e6:>9.1f} MB "
        f"{peak / size:>8.1f}x {peak / target_bytes(size):>8.2f}  "
        f"{verdict}{f'  ({extra})' if extra else ''}"
    )


def within_target(row: dict) -> bool:
    return row["peak_bytes"] <= min(target_bytes(row["model_bytes"]), CEILING)


def main() -> int:
    from kit.models import model_names

    models = env_list("BENCH_MEMORY_MODELS", ",".join(model_names()))
    small = os.environ.get("BENCH_MEMORY_SMALL", "0") == "1"
    print(f"peak RSS per step, each in a fresh process, one at a time ({load_note()})")
    print(
        f"  {'model':<28}{'step':<7}{'peak':>10} {'wall':>9} {'onnx file':>12} {'peak/file':>9} "
        f"{'peak/target':>11}  (target: 3 x file + 2 GB, at most {CEILING / GB:.0f} GB)"
    )
    rows = measure(models, small)
    missed = [r for r in rows if "error" in r or not within_target(r)]
    print(
        "verdict: "
        f"{'ok' if not missed else f'{len(missed)} of {len(rows)} steps over target or failed'}"
    )
    return 1 if missed and strict() else 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--step"]:
        child(sys.argv[2], sys.argv[3], sys.argv[5] == "1")
    else:
        sys.exit(main())
