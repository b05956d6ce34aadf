"""Graphcore IPU board power: the `gcipuinfo` library, or the `gc-monitor` / `gc-info` tools.

Both give per-IPU attributes as strings ('total board power': '99.5 W' or 'N/A'); `gcipuinfo`
entries are pybind11 maps, converted with dict(). `gc-monitor` prints a '|' table (its documented
form; it has no JSON output). A C2 or
C600 card reports the power of the whole board on each of its IPUs, so the kit sums one value
per board ('board serial number'), never one per IPU. The measured process must run with
GCDA_MONITOR=1 or the sensors read N/A: `enable_ipu_monitoring()` sets it and records that it did.
"""

from __future__ import annotations

import importlib
import os
import re
import shutil
import subprocess
from collections.abc import MutableMapping
from typing import Any

from kit.measure.power.base import PowerSampler, Reading, SamplerOptions, SensorError, Series
from kit.measure.power.summary import PowerSummary

POWER_KEY = "total board power"
WATTS = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*W\s*$", re.IGNORECASE)
MONITOR_VAR = "GCDA_MONITOR"
_monitoring_record: list[str] = []


def enable_ipu_monitoring(env: MutableMapping[str, str] | None = None) -> str:
    """Set GCDA_MONITOR=1 in `env` (default: this process, inherited by children); return a note.

    Call before the measured process opens its IPUs (for a subprocess, pass its env dict).

    >>> env = {}; enable_ipu_monitoring(env); env
    'GCDA_MONITOR=1 set by kit.measure.power (was unset)'
    {'GCDA_MONITOR': '1'}
    """
    target = os.environ if env is None else env
    before = target.get(MONITOR_VAR)
    target[MONITOR_VAR] = "1"
    where = "this process's environment" if env is None else "the measured process's environment"
    note = (
        f"{MONITOR_VAR}=1 set by kit.measure.power "
        f"({'was ' + repr(before) if before else 'was unset'})"
    )
    _monitoring_record.append(f"{note} in {where}")
    return note


def monitoring_note() -> str:
    """What the kit did about GCDA_MONITOR, or the warning that nothing set it here."""
    if _monitoring_record:
        return _monitoring_record[-1]
    if os.environ.get(MONITOR_VAR) == "1":
        return f"{MONITOR_VAR}=1 was already set in this process's environment (not by the kit)"
    return (
        f"{MONITOR_VAR} is not set in this process: IPU sensors read N/A unless the measured "
        "process sets it (kit.measure.power.enable_ipu_monitoring)"
    )


def parse_watts(value: object) -> float | None:
    """'113.7W', '99.5 W' -> watts; 'N/A' or anything else -> None.

    >>> parse_watts("99.5 W"), parse_watts("N/A")
    (99.5, None)
    """
    match = WATTS.match(str(value))
    return float(match.group(1)) if match else None


def board_power(devices: list[dict], wanted: tuple[int, ...] | None, source: str) -> float:
    """Sum 'total board power' over the distinct boards of the wanted IPU ids."""
    boards: dict[str, float | None] = {}
    for dev in devices:
        if wanted is not None and _int(dev.get("id")) not in wanted:
            continue
        board = str(dev.get("board serial number") or f"id {dev.get('id')}")
        watts = parse_watts(dev.get(POWER_KEY, "N/A"))
        if boards.get(board) is None:
            boards[board] = watts
    if not boards:
        raise SensorError(
            f"{source} lists no IPU {'with id in ' + str(wanted) if wanted else ''}".strip()
        )
    if any(w is None for w in boards.values()):
        raise SensorError(
            f"{source} reports '{POWER_KEY}' N/A for board(s) "
            f"{', '.join(b for b, w in boards.items() if w is None)} "
            f"(is {MONITOR_VAR}=1 set in the measured process?)"
        )
    return sum(boards.values())  # type: ignore[arg-type]


def _int(value: object) -> int | None:
    try:
        return int(str(value))
    except ValueError:
        return None


class GcIpuInfoSampler(PowerSampler):
    """`gcipuinfo.gcipuinfo()` in update mode: every getDevices() call re-reads the sensors."""

    name = "gcipuinfo"

    def __init__(self, options: SamplerOptions | None = None) -> None:
        super().__init__(options)
        self.info: Any = None  # gcipuinfo's handle, once opened

    @property
    def sensor(self) -> str:
        ids = "all IPUs" if self.options.devices is None else f"IPU {self.options.devices}"
        return f"gcipuinfo {POWER_KEY} ({ids}, one value per board)"

    def probe(self) -> str | None:
        try:
            self._init()
            board_power(ipu_entries(self.info.getDevices()), self.options.devices, "gcipuinfo")
        except SensorError as exc:
            if "N/A" in str(exc):
                return None  # readable once the measured process runs with GCDA_MONITOR=1
            return str(exc)
        return None

    def _init(self) -> None:
        if self.info is not None:
            return
        try:
            module = importlib.import_module("gcipuinfo")
        except ImportError:
            raise SensorError(
                "gcipuinfo unavailable: the Graphcore SDK's gcipuinfo Python module "
                "is not installed (pip install it from the SDK's tools folder)"
            ) from None
        try:
            info = module.gcipuinfo()
            info.setUpdateMode(True)
        except Exception as exc:  # noqa: BLE001 - the SDK raises its own types
            raise SensorError(f"gcipuinfo cannot open the IPU devices: {exc}") from None
        self.info = info

    def open(self) -> None:
        self._init()
        self.notes.append(monitoring_note())

    def read(self) -> Reading:
        try:
            devices = ipu_entries(self.info.getDevices())
        except Exception as exc:  # noqa: BLE001
            raise SensorError(f"gcipuinfo getDevices failed: {exc}") from None
        return Reading(watts=board_power(devices, self.options.devices, "gcipuinfo"))


class GcCliSampler(PowerSampler):
    """`gc-monitor` (its table), else `gc-info -d N -i` per device (device 0 when none are given).

    Each read runs a command, so the rate reached is lower than the library's; the summary says
    which rate was achieved.
    """

    name = "gc-cli"

    def __init__(self, options: SamplerOptions | None = None) -> None:
        super().__init__(options)
        self.tool: str | None = None

    @property
    def sensor(self) -> str:
        tool = {"gc-monitor": "gc-monitor table", "gc-info": "gc-info -d N -i"}.get(
            self.tool or "", "gc tools"
        )
        return f"{tool} {POWER_KEY} (one value per board)"

    def probe(self) -> str | None:
        found = [t for t in ("gc-monitor", "gc-info") if shutil.which(t)]
        if not found:
            return (
                "Graphcore command line tools unavailable: neither gc-monitor nor gc-info is on "
                "PATH"
            )
        for tool in found:
            try:
                self._read_with(tool)
            except SensorError as exc:
                if "N/A" in str(exc):
                    self.tool = tool
                    return None
                continue
            self.tool = tool
            return None
        return f"{' and '.join(found)} gave no '{POWER_KEY}' reading"

    def open(self) -> None:
        reason = self.probe() if self.tool is None else None
        if reason:
            raise SensorError(reason)
        self.notes.append(monitoring_note())

    def read(self) -> Reading:
        return Reading(watts=self._read_with(self.tool or "gc-info"))

    def _read_with(self, tool: str) -> float:
        if tool == "gc-monitor":
            devices = parse_gc_monitor(self._run(["gc-monitor"]))
            return board_power(devices, self.options.devices, "gc-monitor")
        devices = [
            _parse_gc_info(self._run(["gc-info", "-d", str(i), "-i"]))
            for i in (self.options.devices or (0,))
        ]
        return board_power(devices, self.options.devices, "gc-info")

    def _run(self, argv: list[str]) -> str:
        try:
            done = subprocess.run(
                argv, capture_output=True, text=True, timeout=self.options.command_timeout_s
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SensorError(f"{' '.join(argv)} failed: {exc}") from None
        if done.returncode != 0:
            raise SensorError(
                f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip()[:200]}"
            )
        return done.stdout


def _parse_gc_info(text: str) -> dict:
    """'key: value' lines of `gc-info -i` into a dict (first ':' splits)."""
    pairs = (line.strip().split(":", 1) for line in text.splitlines() if ":" in line)
    return {k.strip(): v.strip() for k, v in pairs if v.strip()}


def ipu_entries(devices: object) -> list[dict]:
    """gcipuinfo.getDevices() entries as plain dicts (the SDK returns pybind11 maps, not dicts)."""
    return [dict(d) for d in devices]  # type: ignore[attr-defined]


def parse_gc_monitor(text: str) -> list[dict]:
    """The device rows of gc-monitor's '|' tables as attribute dicts: 'id', 'board serial number'
    and 'total board power' from the columns headed ID, Serial and (Board) Power.

    >>> rows = parse_gc_monitor(GC_MONITOR_EXAMPLE)
    >>> [(r["id"], r["total board power"]) for r in rows]
    [('0', '112.5W'), ('1', '112.5W')]
    """
    rows, header = [], None
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        lowered = [c.lower() for c in cells]
        if "id" in lowered and any("power" in c for c in lowered):
            header = lowered
            continue
        if header is None or len(cells) != len(header):
            continue
        row = dict(zip(header, cells, strict=True))
        power = next(v for k, v in row.items() if "power" in k)
        serial = next((v for k, v in row.items() if "serial" in k), "")
        rows.append({"id": row["id"], "board serial number": serial, POWER_KEY: power})
    return rows


GC_MONITOR_EXAMPLE = """\
+---------------+---------------------------------------------------------+
|  gc-monitor   |              Partition: p (gcd:0) has 2 IPUs             |
+-------------+--------------------+------+----+---------+-------+---------+
|   PCIe ID   |       Serial       | Type | ID |  Temp   | Clock |  Power  |
+-------------+--------------------+------+----+---------+-------+---------+
|    3        | 0063.0063.822391   | C600 | 0  | 40.0 C  |1850MHz| 112.5W  |
|    4        | 0063.0063.822391   | C600 | 1  | 41.0 C  |1850MHz| 112.5W  |
+-------------+--------------------+------+----+---------+-------+---------+
"""


def worker_reading_devices(source: str, payload: object) -> list[dict]:
    """One raw reading from the PopRT worker's sampler as attribute dicts."""
    if source == "gcipuinfo":
        return ipu_entries(payload)
    if source == "gc-monitor":
        return parse_gc_monitor(str(payload))
    if source == "gc-info":
        return [{**_parse_gc_info(text), "id": str(device)} for device, text in payload]  # type: ignore[attr-defined]
    raise SensorError(f"unknown IPU power source {source!r}")


def summary_from_worker(
    raw: dict | None, window_start_ns: int, devices: tuple[int, ...] | None = None
):
    """A PowerSummary from the readings the PopRT worker took over exactly its timed calls."""
    if raw is None:
        return PowerSummary.unavailable("power sampling off for this window")
    source = raw.get("source")
    notes = [
        f"read inside the PopRT worker; {MONITOR_VAR}={raw.get('gcda_monitor')!r} in its "
        "environment"
    ]
    if source is None:
        return PowerSummary.unavailable(
            "no IPU power source readable in the PopRT worker: " + "; ".join(raw.get("errors", [])),
            notes=notes,
        )
    series, errors = Series(), list(raw.get("errors", []))
    for t_ns, payload in raw.get("readings", []):
        try:
            watts = board_power(worker_reading_devices(source, payload), devices, source)
        except SensorError as exc:
            errors.append(str(exc))
            continue
        series.append((t_ns - window_start_ns) / 1e9, Reading(watts=watts))
    ipus = f"IPU {', '.join(map(str, devices))}" if devices else "every IPU"
    sensor = f"{source} {POWER_KEY} in the PopRT worker ({ipus}, one value per board)"
    common: dict[str, Any] = {
        "hz_requested": raw.get("hz_requested"),
        "read_errors": len(errors),
        "window_start_ns": window_start_ns,
        "notes": notes,
    }
    if len(series) < 2:
        last = f": {errors[-1]}" if errors else ""
        return PowerSummary.unavailable(
            f"fewer than two readable samples in the window{last}",
            sensor,
            source,
            n_samples=len(series),
            **common,
        )
    return PowerSummary.from_series(series, counter=False, sensor=sensor, sampler=source, **common)
