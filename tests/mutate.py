"""`make mutate`: mutation testing of the code that computes the figures users read.

mutmut (3.x, configured in pyproject.toml's [tool.mutmut]) copies kit/ into mutants/, makes one
small change at a time (an operator, a constant, a comparison, a dropped argument) in the functions
listed below, and runs the tests that reach the changed function. A mutant is killed when a test
fails. This prints the kill rate per module and every survivor; it exits 1 when the total is below
90 % or a module below 80 % (a survivor is either killed by a new test or explained as equivalent
in EQUIVALENT).

Not part of `make test` (it runs the selected tests hundreds of times). Run: `make mutate`
(MUTATE_ARGS="--max-children 2"; `python -m tests.mutate --report` reprints the last run).
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: Per module: the functions whose figures users read (mutmut's mangled names: x_<function> for a
#: function, xǁ<Class>ǁ<method> for a method). Left out: display and text helpers (Interval.text,
#: the scorecard's display table), the Mann-Whitney test between runs, the published audits, the
#: timing loop itself (window.py's RoundController: timing, not arithmetic) and the C2 study's
#: driver. figures() and reports() are cached (functools.cache), which mutmut does not mutate.
MODULES: dict[str, list[str]] = {
    "kit/measure/stats.py": [
        "xǁLatencyStatsǁfrom_ns",
        "xǁIntervalǁavailable",
        "xǁIntervalǁhalf_width",
        "xǁIntervalǁrel_half_width",
        "xǁIntervalǁscaled",
        "xǁIntervalǁreciprocal",
        "xǁIntervalǁcontains",
        "xǁIntervalǁfrom_dict",
        "x_ratio_interval",
        "x_quantile_interval",
        "x__order_stat",
    ],
    "kit/measure/intervals.py": [
        "x_round_groups",
        "x_round_rates",
        "x_measurement_intervals",
        "x_bytemlperf_intervals",
        "x_kept_marks",
        "x__relative",
        "x_precision_reached",
        "x_figure_interval",
        "x__c2_interval",
    ],
    "kit/measure/bytemlperf.py": ["*"],
    "kit/measure/window.py": [
        "xǁBatchMeasurementǁ__post_init__",
        "xǁBatchMeasurementǁsamples",
        "x_bytemlperf_qps",
    ],
    "kit/publish/compare.py": ["x_verdict", "x_interval_within_tolerance", "x_within_tolerance"],
    "kit/publish/comparability.py": ["*"],
    "kit/publish/scorecard.py": [
        "x__latest_ok",
        "x__row",
        "x_bytemlperf_rows",
        "x_per_batch_rows",
        "x_figure_at_batch",
        "x_headline_qps",
        "x_all_calls",
        "x_differences_of",
        "x_metric_value",
        "x_c2_rows",
        "x_summary_counts",
        "x_measured_on",
    ],
    "kit/published/figures.py": [
        "x_c2_tables",
        "x_c2_latency_ms",
        "x_study_hardware",
        "x_study_part",
        "x_headline_rows",
        "x_ipu_run_settings",
        "x_headline_batch",
        "x_poprt_version",
        "x_c2_setup_value",
        "x_c2_ipus",
        "x_part_named_in",
    ],
    "kit/measure/power/summary.py": ["*"],
    "kit/studies/c2.py": ["x_c2_row"],
}

#: Survivors that change no behaviour a user can see, with the reason (mutant name -> why).
_STRICT_TRUE = (
    "zip(strict=True) made strict=False/None/default over a Series' parallel lists, which "
    "Series.append always grows together: the same pairs"
)
_STRICT_FALSE = "zip(strict=False) made strict=None or the default: the same call"
EQUIVALENT: dict[str, str] = {
    **{
        f"kit.measure.power.summary.x__power_and_energy__mutmut_{n}": _STRICT_TRUE
        for n in (4, 7, 8, 13, 16, 17)
    },
    **{
        f"kit.measure.power.summary.x__power_and_energy__mutmut_{n}": _STRICT_FALSE
        for n in (38, 41, 56, 59)
    },
    "kit.measure.power.summary.xǁPowerSummaryǁfrom_series__mutmut_13": "len(series) > 1 made >= 1: "
    "one sample gives t[-1] - "
    "t[0] = 0.0, the else "
    "branch's value",
    "kit.measure.intervals.x_measurement_intervals__mutmut_11": "the method text of an interval of "
    "which only rel_half_width is used "
    "(set to None)",
    "kit.measure.intervals.x_measurement_intervals__mutmut_14": "the method text of an interval of "
    "which only rel_half_width is used "
    "(left out)",
    **{
        f"kit.measure.bytemlperf.x_bytemlperf_figures__mutmut_{n}": _STRICT_TRUE.replace(
            "a Series' parallel lists, which Series.append always grows together",
            "each thread's calls and the ranges made from them, one per thread",
        )
        for n in (9, 12, 13)
    },
    **{
        f"kit.measure.bytemlperf.x_bytemlperf_kept__mutmut_{n}": "zip(strict=True) over the drops "
        "made from the calls and the calls, one per thread: the same pairs"
        for n in (16, 19, 20)
    },
    **{
        name: 'float("nan") made float("NAN"): Python parses both as NaN'
        for name in (
            "kit.measure.bytemlperf.x_bytemlperf_figures__mutmut_25",
            "kit.measure.bytemlperf.x_bytemlperf_figures__mutmut_57",
            "kit.measure.window.xǁBatchMeasurementǁ__post_init____mutmut_28",
        )
    },
    **{
        f"kit.measure.intervals.{name}": "zip(strict=...) changed over per-thread lists of one "
        "length (a thread's calls with its marks, ranges or cuts; round starts with round ends): "
        "the same pairs"
        for name in [f"x_bytemlperf_intervals__mutmut_{n}" for n in (12, 15, 16)]
        + [f"x_kept_marks__mutmut_{n}" for n in (18, 21, 22)]
        + [f"x_round_groups__mutmut_{n}" for n in (10, 13, 16, 37, 41, 42, 45, 48, 49, 79, 82, 83)]
    },
    "kit.measure.intervals.x_round_groups__mutmut_21": "max(tail) > 0 made >= 0: with every tail 0 "
    "the last round's bounds are set to the "
    "lengths they already are",
    "kit.measure.intervals.x_round_groups__mutmut_55": "min(..., default=0) made default=1: with "
    "no thread, 1 // 3 and 0 // 3 are both 0 "
    "blocks",
    "kit.measure.stats.x_quantile_interval__mutmut_101": "_order_stat(..., floor=False) made "
    "floor=None: both are falsy, the same "
    "branch",
    **{
        f"kit.measure.stats.{name}": "np.asarray(..., dtype=np.float64) made dtype=None/default: "
        "call times are numbers, and every result is float() of the same order statistic, "
        "percentile or quotient"
        for name in (
            "x_quantile_interval__mutmut_3",
            "x_quantile_interval__mutmut_5",
            "xǁLatencyStatsǁfrom_ns__mutmut_4",
            "xǁLatencyStatsǁfrom_ns__mutmut_6",
        )
    },
    "kit.measure.stats.xǁLatencyStatsǁfrom_ns__mutmut_77": "min(int(0.99 n), n - 1) made n + 1: "
    "int(0.99 n) <= n - 1 for every n >= 1, "
    "so min picks it either way",
    "kit.measure.intervals.x_round_rates__mutmut_44": "last > first made >= : when last == first "
    "the wall time is (last - first) / 1e9 = "
    "0.0, the else value",
    **{
        f"kit.measure.stats.x_ratio_interval__mutmut_{n}": "np.asarray(..., dtype=np.float64) made "
        "dtype=None/default: the sums, residuals and quotients of ints or floats are the same "
        "floats"
        for n in (4, 6, 9, 11)
    },
    "kit.measure.intervals.x_figure_interval__mutmut_14": "the replicas test made always true: a "
    "C2 measurement is 'replicas' or "
    "'single' (one thread), and per_call x threads = per_call for one thread",
    **{
        f"kit.publish.scorecard.{name}": "an outcome worked out even where a result exists: _row "
        "and per_batch_rows read it only when the result is None"
        for name in ("x_bytemlperf_rows__mutmut_28", "x_c2_rows__mutmut_10")
    },
    **{
        f"kit.publish.scorecard.x_c2_rows__mutmut_{n}": "a missing reason None instead of '': "
        "verdict reads `missing_reason or 'no result'`, and a measured figure never reads it"
        for n in (74, 76)
    },
    "kit.publish.scorecard.x_bytemlperf_rows__mutmut_110": "the accuracy row's batch None instead "
    "of '': the row shows str(batch or ''), "
    "and figure_interval treats None and '' alike",
    **{
        f"kit.publish.scorecard.{name}": "a reason text where the figure exists (verdict reads the "
        "reason only when the figure is missing) or where the result is None (_row then takes the "
        "outcome's reason)"
        for name in (
            "x_figure_at_batch__mutmut_2",
            "x_figure_at_batch__mutmut_29",
            "x_figure_at_batch__mutmut_39",
            "x_metric_value__mutmut_2",
            "x_metric_value__mutmut_27",
        )
    },
    **{
        f"kit.publish.scorecard.x_figure_at_batch__mutmut_{n}": "the QPS test made never true: the "
        "other branch reads bytemlperf['qps'], which BatchMeasurement sets qps_bytemlperf from"
        for n in (25, 26)
    },
    "kit.published.figures.x_ipu_run_settings__mutmut_57": "to_dict('RECORDS'): pandas lower-cases "
    "the orient",
    "kit.published.figures.x_ipu_run_settings__mutmut_38": "pd.to_numeric without errors='coerce': "
    "pandas parses a blank as NaN, and "
    "every ipu_clients in the spec is a number or blank",
    "kit.publish.scorecard.x_per_batch_rows__mutmut_72": "differences_of(..., batch=None): the "
    "measurement is the one at exactly this "
    "batch (figure_at_batch), so no batch difference can arise either way",
    "kit.publish.scorecard.x_headline_qps__mutmut_29": "a reason text beside a measured QPS: "
    "verdict reads the reason only when the "
    "figure is missing",
    "kit.publish.scorecard.x_figure_at_batch__mutmut_37": "the 'measured before the trim' reason "
    "also where the value exists: verdict "
    "reads the reason only when the figure is missing",
    "kit.publish.comparability.xǁPublishedRunǁof__mutmut_3": "ipu_run_settings(model, None): "
    "PublishedRun takes only the clients "
    "from it, which come from the model's spec whatever the precision",
}

TOTAL_FLOOR, MODULE_FLOOR = 0.90, 0.80


def module_name(path: str) -> str:
    return path.removesuffix(".py").replace("/", ".")


def globs() -> list[str]:
    return [
        f"{module_name(path)}.{name}__mutmut_*" for path, names in MODULES.items() for name in names
    ]


def selected(path: str, key: str) -> bool:
    return any(
        fnmatch.fnmatch(key, f"{module_name(path)}.{name}__mutmut_*") for name in MODULES[path]
    )


def run(max_children: int) -> int:
    # the mutants, never kit/ itself
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["KIT_ROOT"] = str(ROOT)  # data/published is read from the checkout
    cmd = [sys.executable, "-m", "mutmut", "run", "--max-children", str(max_children), *globs()]
    return subprocess.call(cmd, cwd=ROOT, env=env)


KILLED = {1, 3, 36, 24, -24, 152, 255}  # mutmut: test failed, pytest error, timeout
SURVIVED = {0}


def report() -> int:
    total_killed = total = 0
    failing = []
    for path in MODULES:
        meta = ROOT / "mutants" / f"{path}.meta"
        if not meta.exists():
            print(f"{path}: no mutation data (run `make mutate`)")
            failing.append(path)
            continue
        codes = json.loads(meta.read_text())["exit_code_by_key"]
        mine = {k: c for k, c in codes.items() if selected(path, k)}
        tested = {k: c for k, c in mine.items() if c is not None}
        killed = [k for k, c in tested.items() if c in KILLED]
        equivalent = [k for k, c in tested.items() if c in SURVIVED and k in EQUIVALENT]
        other = sorted(k for k in tested if k not in killed and k not in equivalent)
        counted = len(tested) - len(equivalent)
        rate = len(killed) / counted if counted else 1.0
        total_killed += len(killed)
        total += counted
        print(
            f"{path}: {len(killed)}/{counted} killed ({rate:.0%}); {len(equivalent)} equivalent; "
            f"{len(mine) - len(tested)} not run"
        )
        for k in other:
            print(f"    survived ({_status(tested[k])}): {k}")
        if rate < MODULE_FLOOR:
            failing.append(path)
    rate = total_killed / total if total else 0.0
    print(
        f"TOTAL: {total_killed}/{total} killed ({rate:.1%}); floors: {TOTAL_FLOOR:.0%} in all, "
        f"{MODULE_FLOOR:.0%} per module"
    )
    return 0 if rate >= TOTAL_FLOOR and not failing else 1


def _status(code: int) -> str:
    return {0: "no test failed", 5: "no test reaches it", 33: "no test reaches it"}.get(
        code, f"exit {code}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-children", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--report", action="store_true", help="only print the last run's results")
    args = parser.parse_args(argv)
    if not args.report:
        start = time.monotonic()
        code = run(args.max_children)
        print(f"mutmut run: exit {code} after {(time.monotonic() - start) / 60:.1f} min")
    return report()


if __name__ == "__main__":
    sys.exit(main())
