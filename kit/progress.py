"""Progress for long steps: a ticking status line per step (export, conversion, compilation,
evaluation) and a bar over rounds (batch sizes, policies, dataset batches).

Shown in JupyterLab as widgets (`tqdm.auto`), on stderr elsewhere. Quiet in papermill batches,
whose own bar already shows progress: inside `quiet()` (kit.notebook does this when papermill
passed a `results_path`), or when the environment says `KIT_BATCH=1` or `KIT_PROGRESS=0`.

Never inside a timed loop: a step's ticker thread is stopped when its block ends, so steps must
not enclose a timed window; a round's bar is written only between rounds (`note` before a timed
window, `advance` after it). Bars start no tqdm monitor thread.
"""

from __future__ import annotations

import functools
import os
import threading
import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

T = TypeVar("T")

TICKER_NAME = "kit-progress"
TICK_S = 1.0
_quiet_depth = 0


def enabled() -> bool:
    """Whether progress is shown: not inside `quiet()`, nor with KIT_BATCH=1 or KIT_PROGRESS=0."""
    if _quiet_depth:
        return False
    if os.environ.get("KIT_PROGRESS", "").strip().lower() in ("0", "off", "false", "no"):
        return False
    return os.environ.get("KIT_BATCH", "").strip() != "1"


@contextmanager
def quiet(when: bool = True) -> Iterator[None]:
    """No progress inside the block (when `when` is true)."""
    global _quiet_depth
    _quiet_depth += bool(when)
    try:
        yield
    finally:
        _quiet_depth -= bool(when)


@functools.cache
def _bar_class() -> type:
    with warnings.catch_warnings():  # tqdm.auto warns that notebook mode is "experimental"
        warnings.simplefilter("ignore")
        from tqdm.auto import tqdm
    # monitor_interval = 0: no tqdm monitor thread waking up during later timed windows.
    return type("KitBar", (tqdm,), {"monitor_interval": 0})


def _bar(**kwargs: Any):
    return _bar_class()(leave=True, **kwargs)


@contextmanager
def step(label: str, tick_s: float = TICK_S) -> Iterator[None]:
    """A status line for one long call: `label [elapsed]`, ticking every `tick_s` seconds so a
    working step can be told from a hung one; then `label: done [elapsed]` or `failed`.

    Must not enclose a timed window (its ticker thread runs until the block ends).
    """
    if not enabled():
        yield
        return
    # total=1: the widget fills (green) when the step is done and turns red when it fails
    bar = _bar(total=1, desc=label, bar_format="{desc} [{elapsed}]")
    stop = threading.Event()

    def tick() -> None:
        while not stop.wait(tick_s):
            bar.refresh()

    ticker = threading.Thread(target=tick, name=TICKER_NAME, daemon=True)
    ticker.start()
    ok = False
    try:
        yield
        ok = True
    finally:
        stop.set()
        ticker.join()
        bar.set_description_str(f"{label}: {'done' if ok else 'failed'}", refresh=False)
        if ok:
            bar.update(1)
        bar.close()


class Rounds(Generic[T]):
    """A bar over rounds: iterate it; `note(text)` says what the current round is doing.

    The bar is written only when a round starts or ends and when `note` is called, so a timed
    window inside a round runs with no progress code at all.
    """

    def __init__(
        self, items: Iterable[T], label: str, unit: str = "round", total: int | None = None
    ):
        self.items = items
        if total is None and hasattr(items, "__len__"):
            total = len(items)  # type: ignore[arg-type]
        self.bar = _bar(total=total, desc=label, unit=unit) if enabled() else None

    def __iter__(self) -> Iterator[T]:
        ok = False
        try:
            for item in self.items:
                yield item
                if self.bar is not None:
                    self.bar.update(1)
            ok = True
        finally:
            if self.bar is not None:
                self.bar.set_postfix_str("done" if ok else "stopped", refresh=False)
                self.bar.close()

    def note(self, text: str) -> None:
        if self.bar is not None:
            self.bar.set_postfix_str(text, refresh=True)


def rounds(items: Iterable[T], label: str, unit: str = "round", total: int | None = None) -> Rounds:
    """`Rounds` over `items` (a bar when progress is shown, a plain pass-through otherwise).

    >>> with quiet():
    ...     [x * 2 for x in rounds([1, 2], "doubling")]
    [2, 4]
    """
    return Rounds(items, label, unit, total)


def timed_note(what: str, cfg: Any) -> str:
    """What a round says before its timed window, which is not redrawn while it runs: the
    window's minimum duration and call count."""
    return f"{what}: timing (>= {cfg.min_duration_s:g} s and >= {cfg.min_count} calls)"
