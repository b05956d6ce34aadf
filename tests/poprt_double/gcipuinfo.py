"""A test double of the Graphcore SDK's `gcipuinfo` module (not on PyPI).

Like the real one, getDevices() returns pybind11 maps of strings, not dicts (no `.get`, so code
must convert them with dict()), and sensor values read 'N/A' unless the process that reads them
runs with GCDA_MONITOR=1. Board power comes from KIT_GCIPUINFO_DOUBLE_W (default 95.5; several
comma-separated values are several boards, one IPU each, as C600 cards: "N/A,120" is an idle board
that reads N/A and a busy one); the board
type and variant from KIT_GCIPUINFO_DOUBLE_BOARD (default C600 on ipu21, M2000 on ipu2; "Bow-2000"
emulates a Bow).
"""

import os

from poprt.runtime import DeviceManager


class _StringMap:
    """What pybind11 gives for std::map<std::string, std::string>: a mapping without .get()."""

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


class gcipuinfo:  # noqa: N801 - the SDK's class name
    def __init__(self):
        self.update = False

    def setUpdateMode(self, on):  # noqa: N802 - SDK method name
        self.update = bool(on)

    def getDevices(self):  # noqa: N802
        monitored = os.environ.get("GCDA_MONITOR") == "1"
        boards = [
            _watts(w) if monitored else "N/A"
            for w in os.environ.get("KIT_GCIPUINFO_DOUBLE_W", "95.5").split(",")
        ]
        version = DeviceManager().ipu_hardware_version()
        board = os.environ.get("KIT_GCIPUINFO_DOUBLE_BOARD") or {"ipu21": "C600"}.get(
            version, "M2000"
        )
        return [
            _StringMap(
                {
                    "id": str(i),
                    "board serial number": f"0063.0063.82239{i % len(boards) + 1}",
                    "total board power": boards[i % len(boards)],
                    "ipu architecture": version,
                    "board type": board,
                    "board variant": board,
                }
            )
            for i in range(DeviceManager().get_num_devices())
        ]


def _watts(text):
    return "N/A" if text.strip() == "N/A" else f"{float(text):.1f}W"
