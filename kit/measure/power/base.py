"""The sampler interface, its options, and the sampler used when no power sensor is present.

A sampler reads one sensor. It reports power (watts, a gauge), a cumulative energy counter
(joules since `open`), or both. `probe()` says whether it can run here and, when not, why.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path

from kit.errors import InvalidParameter, KitError

DEFAULT_POWERCAP_ROOT = Path("/sys/class/powercap")


class SensorError(KitError):
    """A sensor read failed (the reason is the message); the monitor counts and reports it."""


@dataclass(frozen=True)
class Reading:
    """One read of a sensor: watts now, and/or joules counted since the sampler was opened."""

    watts: float | None = None
    energy_j: float | None = None

    def __post_init__(self) -> None:
        if self.watts is None and self.energy_j is None:
            raise InvalidParameter("reading", self, "needs watts or energy_j")


@dataclass(frozen=True)
class SamplerOptions:
    """What to sample: device indices (GPUs, IPUs), where the powercap tree is, which RAPL zones.

    >>> SamplerOptions(devices=(0, 1)).devices
    (0, 1)
    """

    # None: every device the interface lists (NVML: see cuda_device)
    devices: tuple[int, ...] | None = None
    # NVML: the run's CUDA ordinal, opened by PCI bus id (None: ordinal 0)
    cuda_device: int | None = None
    powercap_root: Path = DEFAULT_POWERCAP_ROOT
    rapl_zones: tuple[str, ...] = ("package",)  # zone name prefixes summed (package-0, package-1)
    command_timeout_s: float = 5.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "powercap_root", Path(self.powercap_root))
        if self.devices is not None and (not self.devices or min(self.devices) < 0):
            raise InvalidParameter(
                "devices", self.devices, "None or a non-empty tuple of indices >= 0"
            )
        if self.cuda_device is not None and self.cuda_device < 0:
            raise InvalidParameter("cuda_device", self.cuda_device, "None or a CUDA ordinal >= 0")
        if not self.rapl_zones:
            raise InvalidParameter("rapl_zones", self.rapl_zones, "at least one zone name prefix")
        if self.command_timeout_s <= 0:
            raise InvalidParameter("command_timeout_s", self.command_timeout_s, "> 0")


class PowerSampler(ABC):
    """One power sensor. Subclasses set `name` (registry key) and describe the sensor."""

    name: str = ""
    #: True when `read()` gives a cumulative energy counter: energy is then a counter
    #: difference, not an integral of power samples.
    has_energy_counter: bool = False
    #: The shortest window this sensor resolves; shorter windows are noted as below its resolution.
    min_window_s: float = 0.0

    def __init__(self, options: SamplerOptions | None = None):
        self.options = options or SamplerOptions()
        self.notes: list[str] = []

    @abstractmethod
    def probe(self) -> str | None:
        """None when this sensor can be read here, else the one-line reason it cannot."""

    @property
    @abstractmethod
    def sensor(self) -> str:
        """Which sensor, in words: 'NVML nvmlDeviceGetPowerUsage GPU0', 'RAPL package-0'."""

    def open(self) -> None:  # noqa: B027 - optional hook
        """Prepare to read (handles, first counter values). Called before the first read."""

    @abstractmethod
    def read(self) -> Reading:
        """Read the sensor now; raise SensorError with the reason when the value is unreadable."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release handles."""

    @property
    def available(self) -> bool:
        return True


class UnavailableSampler(PowerSampler):
    """Stands for 'no power sensor here': never reads, carries the reasons every candidate gave.

    >>> UnavailableSampler(["no powercap interface"]).reason
    'no powercap interface'
    """

    name = "unavailable"
    switched_off = False  # True where power=False asked for none (not a missing sensor)

    def __init__(self, reasons: list[str] | None = None, options: SamplerOptions | None = None):
        super().__init__(options)
        self.reasons = list(reasons or ["no power sampler was selected"])

    @property
    def reason(self) -> str:
        return "; ".join(self.reasons)

    def probe(self) -> str | None:
        return self.reason

    @property
    def sensor(self) -> str:
        return "none"

    def read(self) -> Reading:
        raise SensorError(self.reason)

    @property
    def available(self) -> bool:
        return False


@dataclass
class Series:
    """Sample times (s since the window opened) and values kept for summaries and plots."""

    t_s: list[float] = field(default_factory=list)
    watts: list[float | None] = field(default_factory=list)
    energy_j: list[float | None] = field(default_factory=list)

    def append(self, t_s: float, reading: Reading) -> None:
        self.t_s.append(t_s)
        self.watts.append(reading.watts)
        self.energy_j.append(reading.energy_j)

    def __len__(self) -> int:
        return len(self.t_s)
