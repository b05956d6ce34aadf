"""The mutations of issue 33's table, made by hand one at a time in a scratch copy of the checkout,
each against the tests that cover figures (mutmut's test selection in pyproject.toml): which test
fails first. A mutation no test kills exits 1.

    python -m tests.hand_mutations            # all; prints a Markdown table
    python -m tests.hand_mutations 3 11       # by number

Not part of `make test` (each mutation runs the selected tests once: about 10-40 s).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class HandMutation:
    area: str
    what: str
    path: str
    old: str
    new: str


MUTATIONS = [
    HandMutation("scorecard", "best QPS taken as the minimum", "kit/publish/scorecard.py",
                 'm = max(res.measurements, key=lambda x: x["qps_bytemlperf"] or 0)',
                 'm = min(res.measurements, key=lambda x: x["qps_bytemlperf"] or 0)'),
    HandMutation("scorecard", "AVG Latency read from the median (p50)", "kit/measure/bytemlperf.py",
                 '"avg_latency_ms": sum(durations) / n', '"avg_latency_ms": durations[n // 2]'),
    HandMutation("scorecard", "P99 from numpy's interpolated p99 instead of ByteMLPerf's sorted[int(0.99 n)]",
                 "kit/measure/bytemlperf.py", '"p99_latency_ms": durations[int(0.99 * n)]',
                 '"p99_latency_ms": float(__import__("numpy").percentile(durations, 99))'),
    HandMutation("scorecard", "C2 throughput from the wall-clock throughput", "kit/studies/c2.py",
                 '"throughput": throughput,', '"throughput": m.throughput,'),
    HandMutation("scorecard", "the oldest result chosen", "kit/publish/scorecard.py",
                 "return max(hits, key=lambda pr: pr[1].created_at)",
                 "return min(hits, key=lambda pr: pr[1].created_at)"),
    HandMutation("scorecard", "the replicas multiplier dropped (C2: micro batch for the batch)", "kit/studies/c2.py",
                 "throughput = batch / (latency_ms / 1000.0)", "throughput = micro / (latency_ms / 1000.0)"),
    HandMutation("scorecard", "the interval not passed to the verdict", "kit/publish/scorecard.py",
                 "interval=interval, noisy=", "interval=None, noisy="),
    HandMutation("C2 efficiency", "efficiency inverted (W per image/s)", "kit/studies/c2.py",
                 'row["efficiency"] = throughput / power["mean_w"]', 'row["efficiency"] = power["mean_w"] / throughput'),
    HandMutation("C2 efficiency", "wall-clock throughput per watt", "kit/studies/c2.py",
                 'row["efficiency"] = throughput / power["mean_w"]', 'row["efficiency"] = m.throughput / power["mean_w"]'),
    HandMutation("C2 efficiency", "per-watt from a plain sample mean", "kit/measure/power/summary.py",
                 "mean_w=energy / duration,", "mean_w=sum(w) / len(w),"),
    HandMutation("intervals", "t quantile with k instead of k - 1 degrees of freedom", "kit/measure/stats.py",
                 "half = student_t.ppf(0.5 + level / 2, k - 1) * se", "half = student_t.ppf(0.5 + level / 2, k) * se"),
    HandMutation("intervals", "wrong residuals (a - b for a - r b)", "kit/measure/stats.py",
                 "resid = a - value * b", "resid = a - b"),
    HandMutation("intervals", "order statistic off by one", "kit/measure/stats.py",
                 "idx = math.floor(pos) - 1 if floor else math.ceil(pos)",
                 "idx = math.floor(pos) if floor else math.ceil(pos)"),
    HandMutation("latency statistics", "p90 computed at 95", "kit/measure/stats.py",
                 "np.percentile(ms, [50, 90, 99])", "np.percentile(ms, [50, 95, 99])"),
    HandMutation("latency statistics", "std with ddof=1", "kit/measure/stats.py",
                 "std_ms=float(ms.std()),", "std_ms=float(ms.std(ddof=1)),"),
    HandMutation("verdict", "<= made < at the 10 % tolerance (figure)", "kit/publish/compare.py",
                 "ok = abs(measured - published) <= THROUGHPUT_TOLERANCE * abs(published)",
                 "ok = abs(measured - published) < THROUGHPUT_TOLERANCE * abs(published)"),
    HandMutation("verdict", "<= made < at the 10 % tolerance (interval)", "kit/publish/compare.py",
                 "ok = max(lo - published, published - hi) <= THROUGHPUT_TOLERANCE * abs(published)",
                 "ok = max(lo - published, published - hi) < THROUGHPUT_TOLERANCE * abs(published)"),
    HandMutation("verdict", "diff tolerance doubled", "kit/publish/compare.py",
                 "DIFF_TOLERANCE = 0.10", "DIFF_TOLERANCE = 0.20"),
    HandMutation("ByteMLPerf QPS", "trim slice off by one", "kit/measure/bytemlperf.py",
                 "return [(trim, len(t) - trim) for t in calls]", "return [(trim, len(t) - trim + 1) for t in calls]"),
    HandMutation("ByteMLPerf QPS", "trim 20 made 10", "kit/measure/bytemlperf.py",
                 "BYTEMLPERF_TRIM = 20", "BYTEMLPERF_TRIM = 10"),
    HandMutation("ByteMLPerf QPS", "QPS over every call's window instead of the kept calls'", "kit/measure/bytemlperf.py",
                 "first = min(t[0][0] for t in kept if t)", "first = min(t[0][0] for t in calls if t)"),
    HandMutation("published readers", "the headline metric value taking the QPS number", "kit/published/figures.py",
                 '"metric_value": met["number"]', '"metric_value": qps["number"]'),
    # issue 45: the four that survived a hand-made probe of 45
    HandMutation("C2 efficiency", "samples/s/W from the plain sample mean", "kit/measure/power/summary.py",
                 "self.samples_per_s_per_w = self.samples_per_s / self.mean_w\n",
                 "self.samples_per_s_per_w = self.samples_per_s / self.mean_w_samples\n"),
    HandMutation("ByteMLPerf QPS", "trim skipped only when every client is short (all for any)",
                 "kit/measure/bytemlperf.py", "if any(len(t) <= 2 * trim for t in calls):",
                 "if all(len(t) <= 2 * trim for t in calls):"),
    HandMutation("roofline", "fraction of the peak instead of the attainable bound", "kit/studies/roofline.py",
                 "fraction = achieved / attainable if", "fraction = achieved / peak_gflops if"),
    HandMutation("scorecard", "the table's measured cell showing the published batch", "kit/publish/card_table.py",
                 '_sub(r.get("measured_batch") or r.get("batch_size"),', '_sub(r.get("batch_size"),'),
]


def test_selection() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mutmut"]
    return list(config["pytest_add_cli_args_test_selection"])


def scratch_copy(dest: Path) -> None:
    for name in ("kit", "tests", "data", "benchmarks"):
        shutil.copytree(ROOT / name, dest / name, ignore=shutil.ignore_patterns("__pycache__", "weights", "datasets"))
    for name in ("pyproject.toml", ".importlinter"):
        shutil.copy2(ROOT / name, dest / name)


def first_failure(output: str) -> str:
    hit = re.search(r"^FAILED (\S+)", output, re.M) or re.search(r"^ERROR (\S+)", output, re.M)
    return hit.group(1) if hit else ""


def run_one(m: HandMutation, tests: list[str]) -> tuple[bool, str]:
    with tempfile.TemporaryDirectory(prefix="kit-hand-mutation-") as tmp:
        dest = Path(tmp)
        scratch_copy(dest)
        source = (dest / m.path).read_text()
        if source.count(m.old) != 1:
            raise SystemExit(f"{m.path}: {m.old!r} occurs {source.count(m.old)} times (expected once): update MUTATIONS")
        (dest / m.path).write_text(source.replace(m.old, m.new))
        env = {**os.environ, "PYTHONPATH": str(dest), "KIT_ROOT": str(dest)}
        cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
               "-p", "no:randomly", "-o", "addopts=-rfE", *tests]
        done = subprocess.run(cmd, cwd=dest, env=env, capture_output=True, text=True)
        return done.returncode != 0, first_failure(done.stdout)


def main(argv: list[str] | None = None) -> int:
    picks = [int(a) for a in (argv if argv is not None else sys.argv[1:])]
    chosen = [(i, m) for i, m in enumerate(MUTATIONS, 1) if not picks or i in picks]
    tests = test_selection()
    print("| # | code | mutation | killed by |\n|---|---|---|---|", flush=True)
    survivors = 0
    for i, m in chosen:
        killed, test = run_one(m, tests)
        survivors += not killed
        print(f"| {i} | {m.area} | {m.what} (`{m.path}`) | {test or ('failed: see pytest' if killed else 'SURVIVED')} |",
              flush=True)
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
