"""Progress (kit/progress.py): shown interactively, quiet in batches, and never inside a timed
window: no ticker thread alive and nothing written while the timed calls run."""

import io
import json
import threading
import time

import pytest

from kit import progress
from kit.studies import c2, model_benchmark

FAST = dict(
    model="resnet50-torch-fp32",
    small=True,
    backend="fake",
    batch_sizes=[1, 2],
    warmup=2,
    min_duration_s=0.1,
    min_count=5,
    target_ci=0.0,
    check_numerics=False,
    accuracy=True,
    power=False,
)


@pytest.fixture
def shown(monkeypatch):
    """Progress on, as in JupyterLab; whatever the bars write, with the time of each write."""
    monkeypatch.delenv("KIT_BATCH", raising=False)
    monkeypatch.delenv("KIT_PROGRESS", raising=False)
    writes: list[tuple[int, str]] = []

    class Recorder(io.StringIO):
        def write(self, text):
            writes.append((time.perf_counter_ns(), text))
            return super().write(text)

    recorder, bar = Recorder(), progress._bar  # pytest re-captures sys.stderr: hand the file over
    monkeypatch.setattr(progress, "_bar", lambda **kwargs: bar(file=recorder, **kwargs))
    return writes


def text(writes) -> str:
    return "".join(t for _, t in writes)


@pytest.mark.parametrize(
    "env, expected",
    [
        ({}, True),
        ({"KIT_BATCH": "1"}, False),
        ({"KIT_PROGRESS": "0"}, False),
        ({"KIT_BATCH": "0"}, True),
    ],
)
def test_enabled_follows_the_environment(monkeypatch, env, expected):
    monkeypatch.delenv("KIT_BATCH", raising=False)
    monkeypatch.delenv("KIT_PROGRESS", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert progress.enabled() is expected
    with progress.quiet():
        assert not progress.enabled()
    with progress.quiet(False):
        assert progress.enabled() is expected


def test_a_step_ticks_while_it_works_and_says_how_it_ended(shown):
    with progress.step("exporting thing", tick_s=0.05):
        time.sleep(0.3)
    # redrawn while working, not only at the ends
    assert text(shown).count("exporting thing [") >= 3
    assert "exporting thing: done [00:00]" in text(shown)
    assert not [t for t in threading.enumerate() if t.name == progress.TICKER_NAME]
    with pytest.raises(RuntimeError), progress.step("converting thing"):
        raise RuntimeError("boom")
    assert "converting thing: failed" in text(shown)
    assert not [t for t in threading.enumerate() if t.name == progress.TICKER_NAME]


def test_quiet_writes_nothing(shown):
    with progress.quiet(), progress.step("exporting"):
        assert list(progress.rounds([1, 2], "rounds")) == [1, 2]
    assert text(shown) == ""


def test_rounds_count_and_note(shown):
    rounds = progress.rounds(["a", "b", "c"], "sizes", unit="size")
    for item in rounds:
        rounds.note(f"doing {item}")
    out = text(shown)
    assert "sizes: 100%" in out and "3/3" in out and "doing c" in out and "done" in out


def timed_windows(result) -> list[tuple[int, int]]:
    return [
        (min(t[0][0] for t in m.call_times()), max(t[-1][1] for t in m.call_times()))
        for m in result.measurements
    ]


@pytest.mark.parametrize(
    "study, params",
    [
        (model_benchmark, FAST),
        (
            c2,
            dict(
                backend="fake",
                small=True,
                batch_sizes=[2, 4],
                warmup=1,
                min_duration_s=0.1,
                min_count=5,
                power=False,
            ),
        ),
    ],
)
def test_the_timed_loop_runs_with_no_progress_code(
    study, params, shown, outputs, fake_backend, monkeypatch
):
    """While the timed calls run: no ticker thread, no tqdm monitor, not one byte written; and
    the calls timed are the sessions' own calls (nothing wrapped around them)."""
    from tqdm._monitor import TMonitor

    from kit.measure import window as measure

    seen_threads: list[str] = []
    original_bind = fake_backend.load
    bound: list = []

    def load(self, model, config, batch_size):
        session = original_bind(self, model, config, batch_size)
        plain = session.bind

        def bind(inputs):
            def call():
                seen_threads.extend(
                    t.name
                    for t in threading.enumerate()
                    if t.name == progress.TICKER_NAME or isinstance(t, TMonitor)
                )
                return plain(inputs)()

            bound.append(call)
            return call

        session.bind = bind
        return session

    monkeypatch.setattr(fake_backend, "load", load)
    timed: list = []
    time_calls = measure.time_calls  # the loop each thread times its call in
    monkeypatch.setattr(
        measure, "time_calls", lambda call, *a, **k: timed.append(call) or time_calls(call, *a, **k)
    )
    if study is c2:  # C2 times its own pipeline call around session.run
        monkeypatch.setattr(c2, "_pipeline_call", lambda s, *a: s.bind({}))
    from tqdm import tqdm as tqdm_class

    if tqdm_class.monitor is not None:
        # left by another test's bar in this process, not the study's
        tqdm_class.monitor.exit()
        tqdm_class.monitor = None
    result = study.run(params)
    assert result.status == "ok", result.errors
    # progress was on around the windows
    assert "compiling" in text(shown) and "100%" in text(shown)
    assert seen_threads == []
    assert timed and all(any(c is b for b in bound) for c in timed)
    windows = timed_windows(result)
    assert len(windows) == len(params["batch_sizes"])
    inside = [t for t, _ in shown for start, end in windows if start <= t <= end]
    assert inside == [], "progress wrote during a timed window"


def test_notebook_runs_are_quiet_in_a_batch_and_never_overwrite(shown, outputs, fake_backend):
    from kit.notebook import run_study

    params = {**FAST, "accuracy": False}
    batch = outputs / "runs" / "r1" / "model_benchmark.json"
    run_study("model_benchmark", {**params, "results_path": str(batch)})
    assert json.loads(batch.read_text())["status"] == "ok"
    assert text(shown) == ""  # papermill passed results_path: the batch's own bar shows progress
    first = run_study("model_benchmark", params)
    second = run_study("model_benchmark", params)
    assert "compiling" in text(shown)
    saved = sorted((outputs / "interactive").glob("model_benchmark-*.json"))
    assert len(saved) == 2, saved
    # a perf_counter_ns stamp
    first_call = lambda d: d["measurements"][0]["calls"][0][0][0]  # noqa: E731
    assert {first_call(json.loads(p.read_text())) for p in saved} == {
        first_call(r.to_dict()) for r in (first, second)
    }
