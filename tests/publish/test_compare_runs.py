"""`kit compare RUN_A RUN_B` on result folders made from synthetic call times with a known
answer."""

import json
import math

import numpy as np
import pytest

from kit.cli.main import main
from kit.errors import KitError
from kit.measure.stats import Interval
from kit.measure.window import BatchMeasurement
from kit.publish.compare_runs import (
    APART,
    CANNOT_TELL,
    COMMON,
    DIFFERS,
    IN_DRIFT,
    SAME,
    VERDICTS,
    Figure,
    Row,
    between_run_noise,
    compare_figures,
    compare_runs,
    figures_of,
    holm,
    html_report,
    judge,
    load_run,
    smallest_p,
    summary_line,
    text_report,
)
from kit.results import ResultKind, RunResult


def _measurement(rng, mean_ms: float, rounds: int = 8, per_round: int = 20) -> dict:
    calls, t, marks = [], 0, []
    for _ in range(rounds):
        for _ in range(per_round):
            d = int(rng.normal(mean_ms, mean_ms * 0.05) * 1e6)
            calls.append((t, t + d))
            t += d + 1000
        marks.append([len(calls)])
    return BatchMeasurement(
        batch_size=4, mode="single", threads=1, calls=[calls], rounds=marks
    ).to_dict()


def _run(folder, rng, mean_ms: float, cpu: str = "Test CPU", ort: str = "1.20.0"):
    folder.mkdir(parents=True)
    r = RunResult(
        ResultKind.MODEL_BENCHMARK,
        "resnet50-torch-fp32",
        parameters={"published_precision": "FP16"},
        environment={
            "host": "h",
            "cpu": {"model": cpu, "cores": 2},
            "packages": {"onnxruntime": ort},
        },
    )
    r.measurements = [_measurement(rng, mean_ms)]
    r.write(folder / "resnet50.json")
    (folder / "notes.json").write_text(json.dumps({"not": "a result"}))  # ignored
    # LoadGen writes JSON lists beside the results
    logs = folder / "server_scenario_files" / "qps-1"
    logs.mkdir(parents=True)
    (logs / "mlperf_log_trace.json").write_text(json.dumps([{"name": "QuerySamplesComplete"}]))
    return folder


def test_a_real_slowdown_is_significant_and_noise_is_not(tmp_path):
    rng = np.random.default_rng(0)
    a = _run(tmp_path / "a", rng, 10.0)
    same = _run(tmp_path / "same", rng, 10.0)
    slower = _run(tmp_path / "slower", rng, 12.0, cpu="Other CPU", ort="1.21.0")
    text, page = compare_runs(a, slower, out=tmp_path / "cmp.html")
    assert "B lower, worse" in text.split(": throughput")[1].splitlines()[0]  # throughput fell
    assert (
        "not tested again: its rounds are the throughput's"
        in text.split(": QPS")[1].splitlines()[0]
    )
    assert "B higher, worse" in text.split("mean latency")[1].splitlines()[0]
    assert (
        "cpu model: Test CPU -> Other CPU" in text
        and "packages: onnxruntime: 1.20.0 -> 1.21.0" in text
    )
    assert "<table" in page.read_text()
    pages = tmp_path / "pages"
    pages.mkdir()
    _, in_folder = compare_runs(a, slower, out=pages)  # a folder: the page is written inside it
    assert in_folder == pages / "a__vs__slower.html" and "<table" in in_folder.read_text()
    text, _ = compare_runs(a, same, out=tmp_path / "same.html")
    assert (
        "QPS" in text
        and "no significant difference" in text.split(": throughput")[1].splitlines()[0]
    )
    assert "none recorded" in text


def test_figures_carry_intervals_and_rounds(tmp_path):
    run = load_run(_run(tmp_path / "a", np.random.default_rng(1), 5.0))
    figs = figures_of(run)
    qps = figs["resnet50-torch-fp32 [FP16] batch 4: QPS"]
    assert qps.interval.available and len(qps.rounds) == 8
    assert qps.value == pytest.approx(4 / 0.005, rel=0.05)


def test_command_line_and_bad_input(tmp_path, capsys):
    rng = np.random.default_rng(2)
    a, b = _run(tmp_path / "a", rng, 10.0), _run(tmp_path / "b", rng, 10.0)
    assert main(["compare", str(a), str(b), "--out", str(tmp_path / "x.html")]) == 0
    assert "shared figures" in capsys.readouterr().out
    assert main(["compare", str(a), str(tmp_path / "missing")]) == 2
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    with pytest.raises(KitError, match="result JSON"):
        load_run(tmp_path / "empty")


def test_run_to_run_difference_is_judged_against_both_intervals(tmp_path):
    from kit.measure.stats import Interval

    def fig(v, hw):
        return Figure(
            value=v,
            interval=Interval(v, v - hw, v + hw),
            rounds=[],
            unit="samples/s",
            higher_is_better=True,
        )

    inside = Row(key="x", a=fig(100, 3), b=fig(104, 4))  # |4| <= hypot(3, 4) = 5
    outside = Row(key="y", a=fig(100, 3), b=fig(106, 4))
    assert inside.within_intervals is True and outside.within_intervals is False
    assert (
        Row(
            key="z",
            a=Figure(value=1.0, interval=None, rounds=[], unit="", higher_is_better=True),
            b=fig(1, 0.1),
        ).within_intervals
        is None
    )
    assert "1 of 2 (50%)" in summary_line([inside, outside])


def test_run_to_run_drift_is_estimated_from_the_throughput_figures():
    """Synthetic runs: 200 throughput figures measured to +-2 %, the machine drifting 10 % (sd on
    the log scale) between runs. The estimate finds the drift; with no drift it finds about none."""
    from kit.measure.stats import Interval

    rng = np.random.default_rng(7)

    def rows(drift_sd):
        out = []
        for i in range(200):
            a = 100.0 * math.exp(rng.normal(0, 0.01))
            b = 100.0 * math.exp(rng.normal(0, 0.01) + rng.normal(0, drift_sd))
            out.append(
                Row(
                    key=f"m{i} batch 1: throughput",
                    a=Figure(
                        value=a,
                        interval=Interval(a, a * 0.98, a * 1.02),
                        rounds=[],
                        unit="",
                        higher_is_better=True,
                    ),
                    b=Figure(
                        value=b,
                        interval=Interval(b, b * 0.98, b * 1.02),
                        rounds=[],
                        unit="",
                        higher_is_better=True,
                    ),
                )
            )
        return out

    drifting = rows(0.10)
    assert between_run_noise(drifting) == pytest.approx(0.10, abs=0.025)
    line = summary_line(drifting)
    assert "run-to-run drift beyond the within-run intervals" in line and "widened by it" in line
    assert sum(bool(r.within_intervals) for r in drifting) < 0.5 * len(drifting)
    assert sum(bool(r.within(between_run_noise(drifting))) for r in drifting) > 0.85 * len(drifting)
    assert between_run_noise(rows(0.0)) < 0.01
    assert between_run_noise(drifting[:2]) is None
    assert "not estimated" in summary_line(drifting[:2])


def test_holm_adjustment():
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([]) == [] and holm([0.9, 0.8]) == [1.0, 1.0]


def _runs_of_models(folder, rng, means_ms: dict[str, float]):
    folder.mkdir(parents=True)
    for model, mean_ms in means_ms.items():
        r = RunResult(
            ResultKind.MODEL_BENCHMARK,
            model,
            parameters={"published_precision": "FP16"},
            environment={"host": "h", "cpu": {"model": "Test CPU", "cores": 2}},
        )
        r.measurements = [_measurement(rng, mean_ms)]
        r.write(folder / f"{model}.json")
    return folder


def test_a_uniform_speed_up_gives_row_verdicts_that_agree_with_the_summary(tmp_path):
    """A uniform 5 % speed-up made 7 of 12 rows 'significant' while the summary put all 12 inside
    the drift it estimated (±15 %); QPS and throughput counted as two findings; no correction."""
    rng = np.random.default_rng(3)
    means = {f"model{i}": 5.0 + 2 * i for i in range(4)}
    a = _runs_of_models(tmp_path / "a", rng, means)
    b = _runs_of_models(tmp_path / "b", rng, {m: v / 1.05 for m, v in means.items()})
    rows = compare_figures(figures_of(load_run(a)), figures_of(load_run(b)))
    text, _ = compare_runs(a, b, out=tmp_path / "cmp.html")
    summary = text.split("\n\n")[2]
    tested = [r for r in rows if r.p_value is not None]
    assert len(rows) == 16 and len(tested) == 12  # QPS is not a second finding
    assert all(r.p_holm >= r.p_value for r in tested)
    counts = {v: sum(r.verdict == v for r in rows) for v in VERDICTS}
    assert (
        f"{counts[DIFFERS]} differ, {counts[APART]} differ by their intervals where the rank test "
        f"had too few rounds or no significance, {counts[IN_DRIFT]} differ within the runs but "
        f"inside the run-to-run drift, {counts[COMMON]} moved with every other figure (a change of "
        f"the whole run), {counts[SAME]} show no significant difference, {counts[CANNOT_TELL]} "
        "cannot tell"
    ) in summary
    assert "inside the intervals widened by it: 12 of 12" in summary
    # within the runs the shift is plain
    assert counts[DIFFERS] == 0 and counts[COMMON] >= 7 and counts[IN_DRIFT] == 0
    assert "every tested figure is better in B (median throughput B/A 1.05" in summary
    for r in rows:  # no row calls a difference real that the summary puts inside the drift
        assert ("B higher" in r.finding or "B lower" in r.finding) == (
            r.verdict in (DIFFERS, APART, COMMON)
        )


def _runs_with_rounds(tmp_path, name: str, means_ms: dict[str, float], rounds: int, seed: int):
    """A run of several models whose figures each have `rounds` rounds (5: a batch-32 figure's
    usual)."""
    rng = np.random.default_rng(seed)
    folder = tmp_path / name
    folder.mkdir(parents=True)
    for model, mean_ms in means_ms.items():
        r = RunResult(
            ResultKind.MODEL_BENCHMARK,
            model,
            parameters={"published_precision": "FP16"},
            environment={"host": "h", "cpu": {"model": "Test CPU", "cores": 2}},
        )
        r.measurements = [_measurement(rng, mean_ms, rounds=rounds, per_round=6)]
        r.write(folder / f"{model}.json")
    return folder


def _throughput_row(a, b):
    rows = compare_figures(figures_of(load_run(a)), figures_of(load_run(b)))
    return next(
        r for r in rows if r.key.startswith("model0 ") and r.key.endswith(": throughput")
    ), rows


MODELS = {f"model{i}": 5.0 + i for i in range(4)}


def test_a_7x_slowdown_with_5_rounds_is_a_difference_never_no_difference(tmp_path):
    """110 -> 16 samples/s with about 5 rounds read "no significant difference (p = 0.11)": the rank
    test after Holm over 12 figures cannot go under 0.09 with 5 rounds a side, whatever the
    effect."""
    a = _runs_with_rounds(tmp_path, "a", MODELS, rounds=5, seed=1)
    b = _runs_with_rounds(
        tmp_path, "b", {**MODELS, "model0": MODELS["model0"] * 7}, rounds=5, seed=2
    )
    row, rows = _throughput_row(a, b)
    assert smallest_p(5, 5) == pytest.approx(2 / 252)
    assert row.p_floor == pytest.approx(min(1.0, 12 * 2 / 252)) and row.p_holm >= 0.05
    assert row.verdict == APART
    assert row.finding.startswith("B lower, worse: the 95 % interval of B/A excludes 1 (B/A 0.14")
    assert "the two figures' 95 % intervals do not overlap either" in row.finding
    assert (
        "too few rounds for the rank test (5 rounds in A, 5 in B: its smallest possible "
        "Holm-adjusted p is 0.095" in row.finding
    )
    assert not any(
        "no significant difference" in r.finding for r in rows if r.key.startswith("model0 ")
    )


def test_a_20_percent_change_with_separated_intervals_says_so(tmp_path):
    a = _runs_with_rounds(tmp_path, "a", MODELS, rounds=5, seed=3)
    b = _runs_with_rounds(
        tmp_path, "b", {**MODELS, "model0": MODELS["model0"] / 1.2}, rounds=5, seed=4
    )
    row, _ = _throughput_row(a, b)
    assert row.within_intervals is False and row.verdict == APART
    assert row.finding.startswith("B higher, better: the 95 % interval of B/A excludes 1 (B/A 1.2")
    assert "the two figures' 95 % intervals do not overlap either" in row.finding


def test_identical_runs_with_few_rounds_cannot_tell_and_say_what_they_could_detect(tmp_path):
    a = _runs_with_rounds(tmp_path, "a", MODELS, rounds=5, seed=5)
    row, rows = _throughput_row(a, a)
    assert row.ratio == 1.0 and row.verdict == CANNOT_TELL
    assert row.finding.startswith(
        "cannot tell (5 rounds in A, 5 in B; the smallest difference this could detect is "
    )
    assert all("no significant difference" not in r.finding for r in rows)


def test_identical_runs_with_enough_rounds_show_no_significant_difference(tmp_path):
    a = _runs_with_rounds(tmp_path, "a", {"model0": 5.0}, rounds=8, seed=6)
    row, _ = _throughput_row(a, a)
    assert row.p_floor < 0.05 and row.verdict == SAME
    assert row.finding.startswith(
        "no significant difference (Holm-adjusted p = 1; the smallest difference these "
        "rounds could detect is "
    )


def test_every_figure_7x_slower_moved_together_never_inside_the_drift(tmp_path):
    """A whole re-run 7x slower read '36 differ within the runs but inside the run-to-run drift'
    (the drift estimated from those two runs, ±28451 %, held the slow-down itself)."""
    a = _runs_with_rounds(tmp_path, "a", MODELS, rounds=5, seed=7)
    b = _runs_with_rounds(tmp_path, "b", {m: v * 7 for m, v in MODELS.items()}, rounds=5, seed=8)
    row, rows = _throughput_row(a, b)
    assert not any(r.verdict == IN_DRIFT for r in rows)
    assert row.verdict == COMMON and row.finding.startswith(
        "B lower, worse, as every tested figure is"
    )
    text, _ = compare_runs(a, b, out=tmp_path / "cmp.html")
    assert "0 differ within the runs but inside the run-to-run drift" in text
    assert "every tested figure is worse in B (median throughput B/A 0.14" in text


def test_one_model_slower_and_the_others_copied_is_no_common_change(tmp_path):
    """With five identical figures, 'every tested figure is worse in B' was claimed all the same."""
    a = _runs_with_rounds(tmp_path, "a", MODELS, rounds=5, seed=9)
    b = tmp_path / "b"
    b.mkdir()
    for f in a.glob("*.json"):
        (b / f.name).write_bytes(f.read_bytes())
    _runs_with_rounds(tmp_path, "slow", {"model0": MODELS["model0"] * 7}, rounds=5, seed=10)
    (b / "model0.json").write_bytes((tmp_path / "slow" / "model0.json").read_bytes())
    row, rows = _throughput_row(a, b)
    assert row.verdict == APART and not any(r.verdict == COMMON for r in rows)
    text, _ = compare_runs(a, b, out=tmp_path / "cmp.html")
    assert "every tested figure" not in text


def test_a_ratio_interval_that_excludes_1_is_not_called_intervals_that_do_not_overlap():
    """8 % faster: B/A's interval 1.01-1.15 excludes 1, while the figures' own intervals
    [104.7, 115.1] and [113.1, 124.3] overlap; the finding said 'the 95 % intervals do not
    overlap'."""
    from kit.measure.stats import Interval

    def fig(v, lo, hi):
        return Figure(
            value=v,
            interval=Interval(v, lo, hi),
            rounds=[v] * 5,
            unit="samples/s",
            higher_is_better=True,
        )

    row = Row(
        key="m batch 32: throughput",
        a=fig(109.9, 104.7, 115.1),
        b=fig(118.7, 113.1, 124.3),
        ratio=118.7 / 109.9,
    )
    row.p_value, row.p_holm, row.p_floor = 0.3, 0.3, 0.3
    verdict, finding = judge(row, 0.05, None)
    assert verdict == APART and "although the two figures' own 95 % intervals overlap" in finding
    assert "do not overlap" not in finding


def test_a_result_whose_contents_this_kit_cannot_read_is_named_not_skipped(tmp_path):
    """It was skipped as 'not a result file', and `kit compare` said only that the run held no
    result JSON with measurements."""
    folder = _run(tmp_path / "a", np.random.default_rng(3), 10.0)
    path = folder / "resnet50.json"
    data = json.loads(path.read_text())
    data["measurements"][0]["batch_size"] = None
    path.write_text(json.dumps(data))
    with pytest.raises(KitError, match=r"no result this kit can read: .*batch_size=None"):
        load_run(folder)


def test_a_result_cut_short_is_named_in_a_folder_and_as_the_one_file_given(tmp_path):
    """A truncated result JSON was passed over as another tool's file: `kit compare` said only
    that the run held no result JSON with measurements, and a folder left it out unsaid."""
    a = _run(tmp_path / "a", np.random.default_rng(3), 10.0)
    cut = a / "bert.json"
    cut.write_text((a / "resnet50.json").read_text()[:200])
    skipped: list[str] = []
    assert [f.name for f, _ in load_run(a, skipped)] == ["resnet50.json"]
    assert len(skipped) == 1 and skipped[0].startswith(f"{cut}: not a result JSON (JSONDecodeError")
    with pytest.raises(KitError, match=r"bert.json: not a result JSON \(JSONDecodeError"):
        load_run(cut)
    with pytest.raises(KitError, match=r"notes.json: result schema_version None is not supported"):
        load_run(a / "notes.json")  # the one file given, another tool's JSON: said why


def test_a_rerun_faster_on_every_figure_moved_with_every_figure_without_a_drift_estimate(
    tmp_path,
):
    """A same-commit rerun with two throughput figures (too few for a drift estimate) read 'B
    higher, better (Holm-adjusted p=...)' on every figure, and the summary '0 moved with every
    other figure'."""
    rng = np.random.default_rng(11)
    means = {"model0": 5.0, "model1": 9.0}
    a = _runs_of_models(tmp_path / "a", rng, means)
    b = _runs_of_models(tmp_path / "b", rng, {m: v / 1.15 for m, v in means.items()})
    rows = compare_figures(figures_of(load_run(a)), figures_of(load_run(b)))
    tested = [r for r in rows if r.p_value is not None]
    assert between_run_noise(rows) is None and len(tested) == 6
    assert all(r.verdict == COMMON for r in tested), [(r.key, r.verdict) for r in tested]
    assert all("as every tested figure is (median throughput B/A 1.1" in r.finding for r in tested)
    text, _ = compare_runs(a, b, out=tmp_path / "cmp.html")
    summary = text.split("\n\n")[2]
    assert "0 differ, " in summary and "6 moved with every other figure" in summary
    assert "run-to-run drift: not estimated" in summary
    assert "every tested figure is better in B (median throughput B/A 1.1" in summary
    assert "drift estimate holds it" not in summary  # there is none


def _figure(value: float, rounds: list[float], higher: bool) -> Figure:
    return Figure(
        value=value,
        interval=Interval(value, 0.99 * value, 1.01 * value),
        rounds=rounds,
        unit="",
        higher_is_better=higher,
    )


def test_without_a_drift_estimate_only_rows_that_show_a_difference_moved_with_every_figure():
    """Every figure better in B, one of them by a hair: the two that differ read 'moved with every
    figure', the one that shows no significant difference keeps saying so."""
    spread = [-1.0, 1.0, 0.0, 0.5, -0.5, 0.2, -0.2, 0.1]
    rates = [100 + d for d in spread]
    means = [10 + d / 10 for d in spread]
    tails = [12 + d / 10 for d in spread]
    a = {
        "m batch 1: throughput": _figure(100.0, rates, True),
        "m batch 1: mean latency": _figure(10.0, means, False),
        "m batch 1: p99 latency": _figure(12.0, tails, False),
    }
    b = {
        "m batch 1: throughput": _figure(120.0, [1.2 * x for x in rates], True),
        "m batch 1: mean latency": _figure(8.3, [x - 1.7 for x in means], False),
        "m batch 1: p99 latency": _figure(11.99, [x - 0.01 for x in tails], False),
    }
    rows = compare_figures(a, b)
    verdicts = {r.key.rsplit(": ", 1)[1]: r.verdict for r in rows}
    assert verdicts == {"throughput": COMMON, "mean latency": COMMON, "p99 latency": SAME}
    assert "2 moved with every other figure" in summary_line(rows)
    assert "every tested figure is better in B (median throughput B/A 1.200)" in summary_line(rows)


def test_with_a_drift_estimate_a_figure_beyond_the_common_change_still_differs(tmp_path):
    """Every model 5 % faster and one 3x faster: the drift estimated from the throughput figures
    holds the common 5 %; the 3x figure stands out of it and differs."""
    rng = np.random.default_rng(12)
    means = {f"model{i}": 5.0 + 2 * i for i in range(4)}
    a = _runs_of_models(tmp_path / "a", rng, means)
    faster = {m: v / 1.05 for m, v in means.items()}
    b = _runs_of_models(tmp_path / "b", rng, {**faster, "model0": means["model0"] / 3})
    rows = compare_figures(figures_of(load_run(a)), figures_of(load_run(b)))
    assert between_run_noise(rows) is not None
    throughput = {r.key.split(" ")[0]: r.verdict for r in rows if r.key.endswith(": throughput")}
    assert throughput["model0"] == DIFFERS
    assert COMMON in throughput.values() and IN_DRIFT not in throughput.values()


def test_the_report_shows_an_asymmetric_interval_as_its_bounds():
    """A p99 of 22.89 over [19.91, 24.22] read '22.89 ± 2.975', claiming an upper bound of 25.87
    the interval does not reach."""

    def p99(value: float, low: float, high: float) -> Figure:
        return Figure(
            value=value,
            interval=Interval(value, low, high),
            rounds=[],
            unit="ms",
            higher_is_better=False,
        )

    row = Row(
        key="m batch 4: p99 latency", a=p99(22.885, 19.910, 24.217), b=p99(19.85, 19.5527, 20.1473)
    )
    text = text_report([row], [], "a", "b")
    assert "22.89 [19.91, 24.22]" in text and "19.85 ± 0.2973" in text and "2.975" not in text
    assert "22.89 [19.91, 24.22]" in html_report([row], [], "a", "b")
