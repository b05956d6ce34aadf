"""SIGINT and SIGTERM during a batch: one exception, then quiet while the batch cleans up."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class BatchInterrupted(BaseException):  # noqa: N818 - like KeyboardInterrupt, not an error
    """The batch was stopped by a signal; `records` holds what it kept."""

    def __init__(self, signum: int):
        self.signum = signum
        self.records: list = []
        super().__init__(f"interrupted by {signal.Signals(signum).name}")

    @property
    def exit_code(self) -> int:
        return 128 + self.signum  # the shell's convention: 130 for SIGINT, 143 for SIGTERM


@contextlib.contextmanager
def interrupts_raise() -> Iterator[None]:
    """Turn the first SIGINT/SIGTERM into BatchInterrupted; ignore further ones until the block
    ends, so cleanup (killing the notebook, saving the state) is not cut short."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        for sig in SIGNALS:
            signal.signal(sig, signal.SIG_IGN)
        raise BatchInterrupted(signum)

    previous = {sig: signal.signal(sig, handler) for sig in SIGNALS}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
