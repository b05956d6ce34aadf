"""Noise during a window: steal and other load from /proc/stat, frequency, the noisy flag."""

import subprocess
import sys
import time

import pytest

from kit.measure.noise import THRESHOLDS, NoiseMonitor, cpu_times, noisy_reasons


def test_cpu_times_reads_only_our_cpus(tmp_path):
    stat = tmp_path / "stat"
    stat.write_text(
        "cpu  10 0 10 100 0 0 0 5 0 0\ncpu0 1 2 3 40 5 6 7 8 0 0\ncpu1 100 0 0 0 0 0 0 0 0 0\n"
    )
    busy, steal, total = cpu_times([0], str(stat))
    assert (busy, steal, total) == (1 + 2 + 3 + 6 + 7, 8, 1 + 2 + 3 + 40 + 5 + 6 + 7 + 8)
    assert cpu_times([5], str(stat)) is None


@pytest.mark.parametrize(
    ("summary", "expected"),
    [
        ({"steal_share": 0.10}, "CPU steal 10% > 5%"),
        ({"steal_share": 0.01, "steal_peak": 0.30}, "peaked at 30%"),
        ({"other_load": 0.60}, "other processes used 60%"),
        ({"freq_mhz": {"min": 1800, "max": 3000}}, "frequency varied"),
    ],
)
def test_each_threshold_marks_a_window_noisy(summary, expected):
    reasons = noisy_reasons({"thresholds": THRESHOLDS, **summary})
    assert len(reasons) == 1 and expected in reasons[0]


def test_a_quiet_window_has_no_reasons():
    assert (
        noisy_reasons(
            {
                "thresholds": THRESHOLDS,
                "steal_share": 0.0,
                "steal_peak": 0.01,
                "other_load": 0.05,
                "freq_mhz": {"min": 2600, "max": 2600},
            }
        )
        == []
    )


@pytest.mark.skipif(cpu_times([0]) is None, reason="/proc/stat not readable here")
def test_a_busy_process_beside_us_counts_as_other_load():
    spin = subprocess.Popen(
        [sys.executable, "-c", "import time\nt=time.time()\nwhile time.time()-t<3: pass"]
    )
    try:
        time.sleep(0.5)
        with NoiseMonitor(period_s=0.1) as mon:
            time.sleep(1.0)  # we sleep; the child spins one CPU flat out
        s = mon.summary()
    finally:
        spin.kill()
        spin.wait()
    # one busy CPU of ours, allowing for steal
    assert s.other_load >= 0.9 / s.to_dict()["cpus"] * 0.6
    assert 0 <= s.steal_share <= 1
