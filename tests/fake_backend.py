"""A backend for tests: no library, no device; each call sleeps a fixed time and returns zeros.

Registered under the name 'fake' by the `fake_backend` fixture (tests/conftest.py), so studies,
the timed window, trackers and reports run end to end with no real runtime.
"""

from __future__ import annotations

import time

import numpy as np

from kit.backends.base import Backend, BackendConfig, Session
from kit.backends.options import TorchOptions
from kit.models.spec import ExportedModel

CALL_S = 0.002


class FakeSession(Session):
    def __init__(self, model: ExportedModel, batch_size: int, log: list):
        self.model, self.batch_size, self.log = model, batch_size, log
        self.description = {"backend": "fake", "batch_size": batch_size, "call_s": CALL_S}
        self.closed = False

    def run(self, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        time.sleep(CALL_S)
        return [np.zeros((self.batch_size, 4), dtype=np.float32) for _ in self.model.outputs]

    def bind(self, inputs: dict[str, np.ndarray]):
        return lambda: time.sleep(CALL_S)

    def close(self) -> None:
        self.closed = True
        self.log.append(("close", self.batch_size))


class FakeBackend(Backend):
    name = "fake"
    precisions = ("fp32", "fp16", "bf16", "int8")
    options_type = TorchOptions  # takes torch's options: a stand-in for a compiled torch run too
    sessions: list[FakeSession] = []
    log: list = []

    def availability(self) -> str | None:
        return None

    def device_info(self, config: BackendConfig) -> dict:
        return {"kind": "cpu", "name": "fake device", "cores": 1, "peak": None}

    def load(self, model: ExportedModel, config: BackendConfig, batch_size: int) -> FakeSession:
        self.check_precision(config.precision)
        session = FakeSession(model, batch_size, FakeBackend.log)
        FakeBackend.sessions.append(session)
        return session
