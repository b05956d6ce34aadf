"""CPU energy from Linux powercap RAPL counters (Intel, and AMD through the same tree).

Each top-level zone (`intel-rapl:0`, or `amd-rapl:0` on some kernels) has `name` (package-0,
psys, dram), `energy_uj` (a counter in microjoules that wraps at `max_energy_range_uj`) and is
readable by root only since Linux 5.10. Zones whose name starts with one of
`SamplerOptions.rapl_zones` are summed; psys is left out by default because it contains them.
Subzones (core, uncore, dram: `intel-rapl:0:2`) are flat in the powercap class directory too;
DRAM is outside the package figure on Intel, so `rapl_zones=("package", "dram")` adds it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from kit.measure.power.base import PowerSampler, Reading, SamplerOptions, SensorError

ZONE_DIR = re.compile(r"^[a-z]+-rapl(:\d+)+$")  # zones (intel-rapl:0) and subzones (intel-rapl:0:2)


def _read_text(path: Path) -> str:
    return path.read_text()


def _read_int(path: Path) -> int:
    try:
        return int(_read_text(path).strip())
    except PermissionError:
        raise SensorError(
            f"permission denied on {path} (RAPL counters are root-only since "
            "Linux 5.10; run as root or grant read access)"
        ) from None
    except (OSError, ValueError) as exc:
        raise SensorError(f"cannot read {path}: {exc}") from None


@dataclass
class Zone:
    """One RAPL zone and the running total of its counter, wrap-arounds included."""

    path: Path
    name: str
    max_range_uj: int
    last_uj: int = 0
    total_uj: int = 0

    def start(self) -> None:
        self.last_uj = _read_int(self.path / "energy_uj")
        self.total_uj = 0

    def advance(self) -> int:
        """Read the counter and add what was used since the last read (one wrap at most)."""
        now = _read_int(self.path / "energy_uj")
        delta = now - self.last_uj
        if delta < 0:
            delta += self.max_range_uj
        self.last_uj = now
        self.total_uj += delta
        return self.total_uj


class RaplSampler(PowerSampler):
    """Sum of the selected RAPL zones' energy counters; power comes from counter differences."""

    name = "rapl"
    has_energy_counter = True

    def __init__(self, options: SamplerOptions | None = None) -> None:
        super().__init__(options)
        self.zones: list[Zone] = []

    @property
    def root(self) -> Path:
        return Path(self.options.powercap_root)

    @property
    def sensor(self) -> str:
        names = "+".join(z.name for z in self.zones) or "no zone"
        return f"RAPL {names} ({self.root})"

    def probe(self) -> str | None:
        try:
            self.zones = self._find_zones()
            for zone in self.zones:
                _read_int(zone.path / "energy_uj")
        except SensorError as exc:
            return str(exc)
        return None

    def _find_zones(self) -> list[Zone]:
        if not self.root.is_dir():
            raise SensorError(f"no powercap interface on this machine ({self.root} missing)")
        dirs = sorted(p for p in self.root.iterdir() if ZONE_DIR.match(p.name))
        if not dirs:
            raise SensorError(f"no RAPL zones under {self.root} (no intel-rapl:N or amd-rapl:N)")
        zones = []
        for d in dirs:
            name = _read_text(d / "name").strip() if (d / "name").exists() else d.name
            if name.startswith(self.options.rapl_zones):
                zones.append(Zone(d, name, _read_int(d / "max_energy_range_uj")))
        if not zones:
            raise SensorError(f"no RAPL zone under {self.root} is named {self.options.rapl_zones}")
        return zones

    def open(self) -> None:
        if not self.zones:
            self.zones = self._find_zones()
        for zone in self.zones:
            zone.start()

    def read(self) -> Reading:
        return Reading(energy_j=sum(zone.advance() for zone in self.zones) / 1e6)
