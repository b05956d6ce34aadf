"""Issue 43, item 5: a slow row says where its time went. Every model result keeps the wall seconds
of each phase (export, search, compile, numerics, timing, ...); the report and the index show
them."""

from __future__ import annotations

import time

import numpy as np
import pytest

from kit.errors import InvalidParameter
from kit.measure.time_account import TimeAccount, by_phase
from kit.studies import model_benchmark
from tests.studies.test_studies import FAST_MODEL, indexed

LOAD_S = 0.3  # a compile this slow is the compile phase's, never the timing's


class Ticks:
    """A clock that moves only when told: known answers for the account's arithmetic."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_each_phase_gets_its_own_seconds_and_the_rest_is_other():
    clock = Ticks()
    account = TimeAccount(clock=clock)
    clock.now += 1.0  # before any phase: setting up
    with account.phase("export", detail="resnet50"):
        clock.now += 2.0
    with account.phase("timing", 4) as phase:
        clock.now += 10.0
        phase.detail = "10 s timed"
    with account.phase("search", 4):
        clock.now += 3.0
    clock.now += 0.5
    got = account.to_dict()
    assert (got["total_s"], got["other_s"]) == (16.5, 1.5)
    assert [(p["phase"], p["seconds"], p["batch_size"], p["detail"]) for p in got["phases"]] == [
        ("export", 2.0, None, "resnet50"),
        ("timing", 10.0, 4, "10 s timed"),
        ("search", 3.0, 4, ""),
    ]
    assert by_phase(got) == {"export": 2.0, "search": 3.0, "timing": 10.0, "other": 1.5}


def test_the_seconds_no_phase_covered_are_the_total_less_the_phases():
    clock = Ticks()
    account = TimeAccount(clock=clock)
    clock.now += 1.5
    with account.phase("compile", 1):
        clock.now += 2.0
    clock.now += 0.25
    got = account.to_dict()
    assert (got["total_s"], got["other_s"]) == (3.75, 1.75)


def test_a_phase_that_raises_is_still_counted_and_says_so():
    clock = Ticks()
    account = TimeAccount(clock=clock)
    with pytest.raises(RuntimeError), account.phase("timing", 32):
        clock.now += 4.0
        raise RuntimeError("device lost")
    (phase,) = account.to_dict()["phases"]
    assert phase["seconds"] == 4.0 and "stopped by an error" in phase["detail"]


def test_a_phase_the_account_does_not_know_is_refused_by_name():
    ran = []
    with (
        pytest.raises(InvalidParameter, match="'warmup'.*one of export"),
        TimeAccount().phase("warmup"),
    ):
        ran.append(True)
    assert not ran


@pytest.fixture
def slow_loading(fake_backend, monkeypatch):
    load = fake_backend.load

    def slow(self, model, config, batch_size):
        time.sleep(LOAD_S)
        return load(self, model, config, batch_size)

    monkeypatch.setattr(fake_backend, "load", slow)
    # outputs shaped as the small resnet50's, so the numerics check compares them with the
    # reference's
    monkeypatch.setattr(
        "tests.fake_backend.FakeSession.run",
        lambda self, inputs: [np.zeros((self.batch_size, 10), dtype=np.float32)],
    )
    return fake_backend


def test_a_model_result_splits_its_seconds_into_export_compile_numerics_and_timing(
    outputs, slow_loading
):
    result = model_benchmark.run({**FAST_MODEL, "check_numerics": True, "min_duration_s": 0.2})
    assert result.status == "ok", result.errors
    account = result.tables.to_dict()["time_account"]
    phases = {(p["phase"], p["batch_size"]): p for p in account["phases"]}
    assert {"export", "compile", "numerics", "timing"} <= {name for name, _ in phases}
    for m in result.measurements:
        batch = m.batch_size
        timing, compile_ = phases[("timing", batch)], phases[("compile", batch)]
        # the timed calls are inside the timing phase, the slow load is not
        assert m.more["wall_time_s"] <= timing["seconds"] < m.more["wall_time_s"] + LOAD_S
        # the fake backend loads one session (numerics: the reference)
        assert compile_["seconds"] >= LOAD_S
        assert f"{m.more['wall_time_s']:.1f} s timed ({m.latency.count} calls" in timing["detail"]
    covered = sum(p["seconds"] for p in account["phases"])
    assert covered <= account["total_s"] + 0.05
    assert account["total_s"] == pytest.approx(covered + account["other_s"], abs=0.05)


def test_a_failed_batch_keeps_the_account_of_what_ran(outputs, fake_backend, monkeypatch):
    def broken(self, inputs):
        raise model_benchmark.KitError("the device went away")

    monkeypatch.setattr("tests.fake_backend.FakeSession.bind", broken)
    result = model_benchmark.run(FAST_MODEL)
    assert result.status == "error"
    phases = [
        (p["phase"], p["batch_size"]) for p in result.tables.to_dict()["time_account"]["phases"]
    ]
    assert ("compile", 1) in phases and ("timing", 1) in phases and ("timing", 2) in phases


def test_the_report_and_the_index_show_where_the_seconds_went(outputs, fake_backend):
    from kit.publish import report

    result = model_benchmark.run(FAST_MODEL)
    table = report.time_table(result)
    assert list(table["phase"])[-2:] == ["other", "total"]
    total = result.tables.to_dict()["time_account"]["total_s"]
    assert table.iloc[-1]["seconds"] == round(total, 1)
    timing_s = sum(
        p["seconds"]
        for p in result.tables.to_dict()["time_account"]["phases"]
        if p["phase"] == "timing"
    )
    assert f"timing {timing_s:.1f} s" in table.iloc[-1]["detail"]
    page = indexed(result, outputs)
    assert "<th>Where the seconds went</th>" in page and f"timing {timing_s:.0f}" in page


def test_an_older_result_without_an_account_says_so():
    from kit.publish import report
    from kit.results import RunResult

    old = RunResult.new("model_benchmark", "m", {}, {})
    assert "kept no account" in repr(report.time_view(old))
    assert by_phase({}) == {}


def test_a_row_whose_export_fails_still_says_how_long_the_export_ran(
    outputs, fake_backend, monkeypatch
):
    def no_export(*args, **kwargs):
        time.sleep(0.1)
        raise model_benchmark.KitError("torch.onnx.export failed")

    monkeypatch.setattr(model_benchmark, "load_model", no_export)
    result = model_benchmark.run(FAST_MODEL)
    assert result.status == "error"
    (export,) = result.tables.to_dict()["time_account"]["phases"]
    assert (
        export["phase"] == "export"
        and export["seconds"] >= 0.1
        and "stopped by an error" in export["detail"]
    )


def test_the_c2_study_accounts_for_its_export_compiles_and_windows(outputs, fake_backend):
    from kit.studies import c2

    result = c2.run(
        dict(
            backend="fake",
            batch_sizes=[2, 4],
            small=True,
            warmup=1,
            min_duration_s=0.05,
            target_ci=0.0,
            min_count=3,
        )
    )
    assert result.status == "ok", result.errors
    phases = [
        (p["phase"], p["batch_size"]) for p in result.tables.to_dict()["time_account"]["phases"]
    ]
    assert phases == [
        ("export", None),
        ("compile", 2),
        ("timing", 2),
        ("compile", 4),
        ("timing", 4),
    ]
    for m, p in zip(
        result.measurements,
        [p for p in result.tables.to_dict()["time_account"]["phases"] if p["phase"] == "timing"],
        strict=True,
    ):
        assert m.more["wall_time_s"] <= p["seconds"]


def test_a_phase_outside_a_study_times_nothing_and_still_checks_its_name():
    from kit.measure.time_account import phase

    with phase("timing", 4) as record:
        pass
    assert record.seconds == 0.0
    with pytest.raises(InvalidParameter), phase("idle"):
        pass


def test_the_timing_detail_names_the_limit_the_window_ran_under_when_stretched_for_power():
    """Stretched for a sensor that needs 0.3 s, a window asked to stop by 0.05 s ran under a 0.3 s
    limit."""
    from kit.measure.power.base import PowerSampler, Reading
    from kit.measure.time_account import timing_detail
    from kit.measure.window import MeasureConfig, timed_window

    class SlowSensor(PowerSampler):
        name, min_window_s = "slow", 0.3
        sensor = "slow sensor"

        def probe(self):
            return None

        def read(self):
            return Reading(watts=50.0)

    cfg = MeasureConfig(warmup=1, min_duration_s=0.02, min_count=3, max_duration_s=0.05)
    m = timed_window([lambda: time.sleep(0.001)], 1, cfg, SlowSensor())
    assert m.precision["limit_s"] == 0.3 and "limit 0.3 s), 1 warm-up call" in timing_detail(m, cfg)
    again = type(m).from_dict(m.to_dict())
    assert again.precision["limit_s"] == 0.3
    assert "1 warm-up call after the numerics call" in timing_detail(m, cfg, "the numerics call")


def test_the_index_cell_adds_what_the_study_did_not_cover_and_survives_odd_accounts():
    from kit.publish.site import time_split
    from kit.results.tables import TimeAccount

    account = {
        "total_s": 60.0,
        "other_s": 2.0,
        "phases": [{"phase": "export", "seconds": 8.0}, {"phase": "timing", "seconds": 50.0}],
    }
    assert (
        time_split(TimeAccount.from_dict(account), 70.0)
        == "export 8 · timing 50 · other 2 · outside the study 10"
    )
    assert (
        time_split(TimeAccount.from_dict({"total_s": 12.0, "other_s": 12.0, "phases": []}), 20.0)
        == "study 12 · outside the study 8"
    )  # a study that marks no phase (the server scenario)
    assert (
        time_split(TimeAccount.from_dict({**account, "other_s": None}))
        == "export 8 · timing 50 · other 0"
    )
    newer = {**account, "phases": [*account["phases"], {"phase": "upload", "seconds": 3.0}]}
    assert "upload 3" in time_split(TimeAccount.from_dict(newer))
    assert (
        time_split(TimeAccount.from_dict(None)) == "—"
        and time_split(TimeAccount.from_dict("junk")) == "—"
    )
