"""The IPU's power sensors read in a thread while the clients run; the readings go back raw."""

import os
import subprocess
import threading
import time


class SensorLog:
    """Reads the IPU sensors in a thread at `hz` and returns the raw readings; the kit parses them
    (kit.measure.power.ipu), so the rules live in one place. Sources: 'gcipuinfo' (entries converted
    with dict()), 'gc-monitor' (its table, as text) or 'gc-info' (`gc-info -d N -i`, as text)."""

    def __init__(self, options):
        self.options = options or None
        self.readings, self.errors = [], []
        self._stop = threading.Event()
        self._thread = None
        self._read = None
        self.source = None
        self._closed_ns = None

    def start(self):
        if not self.options:
            return
        for source in self.options.get("sources", ("gcipuinfo", "gc-monitor", "gc-info")):
            try:
                self._read = self._reader(source)
                self._read()
            except Exception as exc:  # noqa: BLE001 - the kit reports why power is unavailable
                self.errors.append(f"{source}: {type(exc).__name__}: {exc}")
                self._read = None
                continue
            self.source = source
            break
        if self._read is None:
            return
        self._sample()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def close(self):
        """End the window now with a closing reading; a reading the thread starts later is
        dropped."""
        if self._thread is None or self._closed_ns is not None:
            return
        self._stop.set()
        self._closed_ns = self._sample()

    def stop(self):
        if not self.options:
            return None
        if self._thread is not None:
            self.close()
            self._thread.join()
            self.readings = sorted(r for r in self.readings if r[0] <= self._closed_ns)
        return {
            "source": self.source,
            "readings": self.readings,
            "errors": self.errors,
            "hz_requested": float(self.options.get("hz", 20.0)),
            "gcda_monitor": os.environ.get("GCDA_MONITOR"),
        }

    def _loop(self):
        period = 1.0 / float(self.options.get("hz", 20.0))
        while not self._stop.wait(period):
            self._sample()

    def _sample(self):
        t = time.perf_counter_ns()
        try:
            self.readings.append((t, self._read()))
        except Exception as exc:  # noqa: BLE001
            self.errors.append(f"{type(exc).__name__}: {exc}")
        return t

    def _reader(self, source):
        timeout = float(self.options.get("command_timeout_s", 5.0))
        if source == "gcipuinfo":
            import gcipuinfo

            info = gcipuinfo.gcipuinfo()
            info.setUpdateMode(True)
            return lambda: [dict(d) for d in info.getDevices()]
        if source == "gc-monitor":
            return lambda: _command(["gc-monitor"], timeout)
        if source == "gc-info":
            ids = self.options.get("devices") or [0]
            return lambda: [[i, _command(["gc-info", "-d", str(i), "-i"], timeout)] for i in ids]
        raise ValueError(f"unknown power source {source!r}; known: gcipuinfo, gc-monitor, gc-info")


def _command(argv, timeout):
    done = subprocess.run(argv, capture_output=True, timeout=timeout, text=True)
    if done.returncode != 0:
        command = " ".join(argv)
        raise RuntimeError(f"{command} exited {done.returncode}: {done.stderr.strip()[:200]}")
    return done.stdout
