"""IPU power: gcipuinfo entries converted with dict(), gc-monitor's table, readings from the
worker."""

from __future__ import annotations

import os
import sys
import textwrap
import time
from pathlib import Path

import pytest

from kit.measure.power import PowerMonitor, select_sampler
from kit.measure.power.base import SamplerOptions
from kit.measure.power.ipu import (
    GC_MONITOR_EXAMPLE,
    ipu_entries,
    parse_gc_monitor,
    summary_from_worker,
)
from tests.ipu_helpers import DOUBLE


class PybindMap:
    """Like gcipuinfo's std::map<string, string> entries: a mapping without .get()."""

    def __init__(self, items):
        self._items = dict(items)

    def __getitem__(self, key):
        return self._items[key]

    def __iter__(self):
        return iter(self._items)

    def __len__(self):
        return len(self._items)

    def keys(self):
        return self._items.keys()


def entry(i, watts, serial="0063.0063.822391"):
    return PybindMap({"id": str(i), "board serial number": serial, "total board power": watts})


def test_gcipuinfo_entries_become_dicts():
    entries = ipu_entries([entry(0, "99.5W")])
    assert entries == [
        {"id": "0", "board serial number": "0063.0063.822391", "total board power": "99.5W"}
    ]
    assert not hasattr(PybindMap({}), "get")


def test_gcipuinfo_sampler_reads_pybind_entries(monkeypatch):
    import types

    class Info:
        def setUpdateMode(self, on):  # noqa: N802
            pass

        def getDevices(self):  # noqa: N802
            return [entry(0, "110.0W"), entry(1, "110.0W"), entry(2, "55.0W", "other")]

    monkeypatch.setitem(sys.modules, "gcipuinfo", types.SimpleNamespace(gcipuinfo=Info))
    sampler = select_sampler("ipu")
    sampler.open()
    assert sampler.read().watts == pytest.approx(165.0)


def test_gc_monitor_table_is_parsed():
    rows = parse_gc_monitor(GC_MONITOR_EXAMPLE)
    assert [r["id"] for r in rows] == ["0", "1"] and rows[0][
        "board serial number"
    ] == "0063.0063.822391"
    assert parse_gc_monitor("no table here\n") == []


def test_gc_monitor_cli_sampler_runs_it_without_json(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "gcipuinfo", None)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "gc-monitor"
    exe.write_text(
        f"#!{sys.executable}\n"
        + textwrap.dedent(f"""
        import sys
        assert sys.argv[1:] == [], sys.argv
        print({GC_MONITOR_EXAMPLE!r})
        """)
    )
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin")
    sampler = select_sampler("ipu", SamplerOptions())
    assert sampler.name == "gc-cli" and "gc-monitor table" in sampler.sensor
    with PowerMonitor(sampler, hz=10) as mon:
        time.sleep(0.05)
    # both IPUs are on one board: counted once
    assert mon.summary(10).mean_w == pytest.approx(112.5)


def test_summary_from_worker_readings():
    start = 1_000_000_000
    raw = {
        "source": "gcipuinfo",
        "gcda_monitor": "1",
        "hz_requested": 20.0,
        "errors": [],
        "readings": [
            (start, [entry(0, "100.0W")]),
            (start + 500_000_000, [entry(0, "120.0W")]),
            (start + 1_000_000_000, [entry(0, "100.0W")]),
        ],
    }
    s = summary_from_worker(raw, start)
    assert (
        s.method == "measured"
        and s.mean_w == pytest.approx(110.0)
        and s.duration_s == pytest.approx(1.0)
    )
    raw["readings"] = [(start, [entry(0, "N/A")]), (start + 1, [entry(0, "N/A")])]
    s = summary_from_worker(raw, start)
    assert s.method == "unavailable" and "GCDA_MONITOR=1" in s.reason
    none = summary_from_worker(
        {"source": None, "errors": ["gcipuinfo: ModuleNotFoundError"]}, start
    )
    assert none.method == "unavailable" and "ModuleNotFoundError" in none.reason


def test_the_gcipuinfo_double_reads_na_without_gcda_monitor(monkeypatch):
    monkeypatch.syspath_prepend(str(DOUBLE))
    monkeypatch.delitem(sys.modules, "gcipuinfo", raising=False)
    import gcipuinfo

    monkeypatch.delenv("GCDA_MONITOR", raising=False)
    assert dict(gcipuinfo.gcipuinfo().getDevices()[0])["total board power"] == "N/A"
    monkeypatch.setenv("GCDA_MONITOR", "1")
    assert dict(gcipuinfo.gcipuinfo().getDevices()[0])["total board power"] == "95.5W"
    monkeypatch.delitem(sys.modules, "gcipuinfo")
    assert Path(gcipuinfo.__file__).parent == DOUBLE


def test_gc_info_readings_from_the_worker_are_the_asked_devices():
    """The worker runs `gc-info -d N -i` for the attached IPU N and sends (N, text): the reading is
    that IPU's, even where gc-info's own text names no id."""
    text = "board serial number: 0063.0063.822392\ntotal board power: 120.0 W\n"
    raw = {
        "source": "gc-info",
        "readings": [[0, [[1, text]]], [int(1e9), [[1, text]]]],
        "errors": [],
    }
    summary = summary_from_worker(raw, 0, (1,))
    assert summary.method == "measured" and summary.mean_w == pytest.approx(120.0), summary
