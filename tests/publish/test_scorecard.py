"""The scorecard shows every job's real state (issue 14 #4, #5, #11): failed with its error, timed
out, unreadable result (named), not selected, not measured with the reason; Mean Diff counts only
from real weights on the published dataset; the seed-000 table is in it."""

import pytest

from kit.batch import JobRecord
from kit.batch.state import save_state
from kit.publish import scorecard
from kit.results import ResultKind, RunResult


def _result(name, precision="FP16", **fields):
    r = RunResult(
        ResultKind.MODEL_BENCHMARK,
        name,
        parameters={"model": name, "published_precision": precision},
        environment={},
    )
    for k, v in fields.items():
        setattr(r, k, v)
    return r


def _row(card, model, figure, study="bytemlperf_c600", precision="FP16"):
    rows = card[
        (card.study == study)
        & (card.model == model)
        & (card.figure == figure)
        & (card.precision == precision)
    ]
    return rows.iloc[0]


@pytest.fixture
def runs(tmp_path, monkeypatch):
    out = tmp_path / "outputs"
    (out / "runs" / "r1").mkdir(parents=True)
    monkeypatch.setenv("KIT_OUTPUTS", str(out))
    return out


def _record(name: str, status: str, message: str) -> dict:
    """A job's record as the batch runner writes it to state.json."""
    return JobRecord(
        name=name,
        notebook="model_benchmark.ipynb",
        status=status,
        run_id="r1",
        duration_s=1.0,
        fingerprint="f",
        notebook_out=f"runs/r1/{name}.ipynb",
        html=f"runs/r1/{name}.html",
        results=f"runs/r1/{name}.json",
        message=message,
    ).to_dict()


def test_every_job_state_is_shown(runs):
    d = runs / "runs" / "r1"
    failed = _result("resnet50-torch-fp32")
    failed.fail(
        "InvalidParameter: invalid batch_size=4: 2 only: fixed.onnx has a fixed batch dimension"
    )
    failed.write(d / "resnet50-torch-fp32_FP16.json")
    (d / "albert-torch-fp32_FP16.json").write_text("{not json")
    save_state(
        runs,
        {
            "jobs": {
                "bert-torch-fp32_FP16": _record(
                    "bert-torch-fp32_FP16", "timeout", "timed out after 600 s"
                ),
                "roberta-torch-fp32_FP16": _record(
                    "roberta-torch-fp32_FP16", "failed", "ZeroDivisionError: boom"
                ),
            },
            "runs": [],
        },
    )
    paths = [
        d / f"{name}.json"
        for name in (
            "resnet50-torch-fp32_FP16",
            "albert-torch-fp32_FP16",
            "bert-torch-fp32_FP16",
            "roberta-torch-fp32_FP16",
        )
    ]
    card = scorecard.build(paths)
    res = _row(card, "resnet50-torch-fp32", "QPS")
    assert res.verdict == "failed" and "fixed batch dimension" in res.reason
    alb = _row(card, "albert-torch-fp32", "F1 Score")
    assert alb.verdict == "failed" and alb.reason.startswith(
        "unreadable result albert-torch-fp32_FP16.json"
    )
    bert = _row(card, "bert-torch-fp32", "QPS")
    assert bert.verdict == "failed" and bert.reason == "timed out: timed out after 600 s"
    rob = _row(card, "roberta-torch-fp32", "QPS")
    assert rob.verdict == "failed" and "ZeroDivisionError: boom" in rob.reason
    wd = _row(card, "widedeep-tf-fp32", "QPS")
    assert wd.verdict == "not measured" and wd.reason.startswith("not selected")
    per_batch = card[
        (card.study == "bytemlperf_reports")
        & (card.model == "bert-torch-fp32")
        & (card.precision == "FP16")
    ]
    assert set(per_batch.verdict) == {"failed"}
    assert (
        "failed" in scorecard.summary_counts(card) and scorecard.summary_counts(card)["failed"] > 0
    )
    # without a batch: every result under outputs/runs, rows without one are "not run"
    assert _row(scorecard.build([]), "widedeep-tf-fp32", "QPS").reason.startswith("not run")


def test_mean_diff_counts_only_real_weights_on_the_published_dataset(runs):
    d = runs / "runs" / "r1"
    numerics = [{"batch_size": 4, "mean_abs": 0.001}]
    _result(
        "conformer-encoder-onnx-fp32",
        model={"weights": {"source": "random"}},
        numerics=numerics,
        accuracy=[
            {"metric": "Mean Diff", "value": 0.002, "status": "not meaningful: random weights"}
        ],
    ).write(d / "random.json")
    card = scorecard.build([d / "random.json"], selected=False)
    row = _row(card, "conformer-encoder-onnx-fp32", "Mean Diff")
    assert row.verdict == "not measured" and row.measured is None
    assert row.reason.startswith("random weights: a Mean Diff from random weights")
    _result(
        "conformer-encoder-onnx-fp32", model={"weights": {"source": "local"}}, numerics=numerics
    ).write(d / "own.json")
    row = _row(
        scorecard.build([d / "own.json"], selected=False),
        "conformer-encoder-onnx-fp32",
        "Mean Diff",
    )
    assert row.measured is None and row.reason.startswith(
        "only a numeric check on the kit's own random inputs"
    )
    _result(
        "conformer-encoder-onnx-fp32",
        model={"weights": {"source": "local"}},
        numerics=numerics,
        accuracy=[{"metric": "Mean Diff", "value": 0.0015, "status": "measured"}],
    ).write(d / "real.json")
    row = _row(
        scorecard.build([d / "real.json"], selected=False),
        "conformer-encoder-onnx-fp32",
        "Mean Diff",
    )
    assert row.measured == pytest.approx(0.0015)


def test_not_comparable_accuracy_is_never_a_pass(runs):
    d = runs / "runs" / "r1"
    status = "not comparable: CAIL2019 scoring: the model gives 2 scores per row"
    _result(
        "roformer-tf-fp32",
        model={"weights": {"source": "local"}},
        accuracy=[{"metric": "Top-1", "value": None, "status": status}],
    ).write(d / "roformer-tf-fp32_FP16.json")
    row = _row(scorecard.build([d / "roformer-tf-fp32_FP16.json"]), "roformer-tf-fp32", "Top-1")
    assert row.verdict == "not measured" and row.reason == status


def test_the_seed_000_table_is_in_the_scorecard():
    card = scorecard.build([])
    older = card[card.study == "bytemlperf_c600_older"]
    assert len(older) == 12 and set(older.model) >= {"widedeep-tf-fp32", "roformer-tf-fp32"}
    assert "seed 000" in older.iloc[0].source


def test_interpretation_states_what_is_scored_and_counts_failures():
    text = scorecard.interpretation(scorecard.build([]))
    assert "every published figure" not in text and "seeds 001 and 000" in text and "failed" in text


def test_a_measured_figure_shows_an_asymmetric_interval_as_its_bounds():
    """The scorecard showed a P99 of 19.91 over [19.343, 19.910] as '19.91 ± 0.57': the larger
    side, an upper bound of 20.48 the interval does not reach."""
    p99 = {"measured": 19.910343, "measured_low": 19.343117, "measured_high": 19.910343}
    assert scorecard.measured_text(p99) == "19.91 [19.34, 19.91]"
    qps = {"measured": 13_499.2, "measured_low": 12_950.0, "measured_high": 14_100.0}
    assert scorecard.measured_text(qps) == "13,499 [12,950, 14,100]"
    # symmetric to the two digits of the half-width: '±' as before
    rate = {"measured": 139.27, "measured_low": 90.5996, "measured_high": 187.945}
    assert scorecard.measured_text(rate) == "139.3 ± 49"
    assert scorecard.measured_text({**rate, "indicative": True}) == "139.3 ± 49 (indicative)"
    assert scorecard.measured_text({"measured": 139.27}) == "139.3"
