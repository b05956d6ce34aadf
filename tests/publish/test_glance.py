"""Issue 27 #4: the scorecard read at a glance. Short reasons from the verdicts the kit really
gives, grouped per verdict with what a user can do, and one sentence per study."""

from pathlib import Path

from kit.hardware.parts import MeasuredOn
from kit.publish import glance, scorecard
from kit.publish.comparability import PublishedRun, measurement_differences
from kit.publish.compare import Comparison, Verdict, verdict

C600 = "Graphcore C600 (1 IPU, Mk2 ipu21)"


def _row(
    on: MeasuredOn | None,
    differences=None,
    measured=11.0,
    reason="",
    figure="QPS",
    study="bytemlperf_c600",
):
    """A scorecard row as kit.publish.scorecard._row makes it, from the real verdict."""
    v, why, ratio = verdict(figure, 13499.0, measured, "c600", on, reason, differences=differences)
    hw = (
        ""
        if on is None
        else f"{on.name} ({on.hardware_class}; onnxruntime fp32)"
        + (" [not run on an IPU]" if on.emulated else "")
    )
    return Comparison(
        study=study,
        figure=figure,
        model="resnet50-torch-fp32",
        precision="FP16",
        batch_size="32",
        unit="samples/s",
        published=13499.0,
        published_hardware=C600,
        measured=measured,
        measured_hardware=hw,
        verdict=v,
        reason=why,
        ratio=ratio,
    ).to_dict()


def test_a_figure_from_other_hardware_says_which_in_a_few_words():
    row = _row(MeasuredOn("cpu", "AMD EPYC"))
    assert row["verdict"] == "not comparable" and row["reason"].startswith(
        "measured on AMD EPYC (cpu), published on c600"
    )
    assert glance.short_reason(row) == "measured on a CPU, not the C600"
    assert (
        glance.short_reason(_row(MeasuredOn("gpu", "NVIDIA H100")))
        == "measured on a GPU, not the C600"
    )
    double = _row(MeasuredOn("ipu", "C600", "c600", emulated=True))
    assert glance.short_reason(double) == "measured on the PopRT test double, not the C600"
    assert glance.measured_device(double) == "the PopRT test double (not an IPU)"
    assert glance.measured_device(row) == "AMD EPYC (CPU)"


def test_a_figure_from_the_published_part_measured_another_way_names_each_difference():
    run = PublishedRun(batch=40, clients=4, precision="fp16", poprt_version="1.3.0", pack=True)
    found = [
        d.text
        for d in measurement_differences({"batch_size": 4, "mode": "clients", "threads": 1}, run)
    ]
    found.append("PopRT 1.4.0, published with PopRT 1.3.0")
    row = _row(MeasuredOn("ipu", "C600", "c600"), differences=found)
    assert row["verdict"] == "not comparable"
    assert glance.short_reason(row) == (
        "on the C600, but another batch size, padded, published in pack mode, "
        "another number of clients, another PopRT version"
    )


def test_every_reason_of_a_scorecard_without_results_has_its_short_form():
    card = scorecard.build([]).to_dict("records")
    shorts = {glance.short_reason(r) for r in card}
    known = {s for s, _ in glance.SHORT.values()}
    assert shorts <= known, shorts - known
    assert {"not run", "a training or price claim, outside an inference kit"} <= shorts


def test_the_reasons_are_grouped_per_verdict_with_what_to_do():
    cpu = MeasuredOn("cpu", "AMD EPYC")
    card = (
        [_row(cpu)] * 42
        + [_row(None, measured=None, reason="random weights", figure="Top-1")] * 12
        + [_row(None, measured=None, reason=scorecard.NOT_SELECTED.reason.text)] * 3
    )
    lines = glance.reason_lines(card)
    assert lines == [
        "0 reproduced",
        "0 differ",
        "42 not comparable: 42 measured on a CPU, not the C600",
        "15 not measured: 12 random weights (real weights: kit fetch-weights MODEL); "
        "3 not selected in this batch (make reproduce without ONLY)",
    ]
    failed = {
        **_row(None, measured=None),
        "verdict": str(Verdict.FAILED),
        "reason": "timed out: after 600 s",
    }
    assert (
        glance.reason_lines(card + [failed])[-1]
        == "1 failed: 1 the job timed out (see the batch index)"
    )


def test_one_sentence_per_study_with_its_counts_and_where_it_was_measured():
    card = scorecard.build([]).to_dict("records")
    measured = _row(MeasuredOn("cpu", "AMD EPYC"))
    sentences = glance.study_sentences([measured] + card)
    assert len(sentences) == 5
    assert sentences[0] == (
        "ByteMLPerf's C600 table (seed 001): 29 figures published on Graphcore C600: "
        "0 reproduced, 0 differ, 1 not comparable, 28 not measured; measured here on AMD EPYC "
        "(CPU)."
    )
    assert sentences[2].startswith(
        "Qwant's C2 study (tables 1-3): 18 figures published on Graphcore C2 card: "
    )
    assert sentences[2].endswith("; none measured here.")
    page = glance.overview_html(card)
    assert page.index("<h2>At a glance</h2>") < page.index(
        "<b>ByteMLPerf&#x27;s C600 table (seed 001)</b>: "
    )
    assert "<b>124 not measured</b>: " in page and f"All {len(card)} published figures" in page


CODED = (
    "reason_code",
    "differences",
    "difference_codes",
    "measured_name",
    "measured_class",
    "emulated",
)


def test_rows_carry_their_reason_code_and_where_they_were_measured_and_glance_reads_those():
    card = scorecard.build([]).to_dict("records")
    assert all(r["reason_code"] for r in card)
    assert {r["reason_code"] for r in card} <= {"not_selected", "not_run", "claim"}
    row = {**card[0], "reason": "a sentence glance must not read", "reason_code": "no_dataset"}
    assert glance.short_reason(row) == "no dataset"  # the code, not the sentence
    gpu = {
        **_row(MeasuredOn("cpu", "AMD EPYC")),
        "reason_code": "other_hardware",
        "measured_class": "gpu",
        "measured_name": "NVIDIA H100",
        "emulated": False,
    }
    assert (
        glance.short_reason(gpu) == "measured on a GPU, not the C600"
        and glance.measured_device(gpu) == "NVIDIA H100 (GPU)"
    )


def test_a_row_measured_another_way_is_said_from_its_difference_codes():
    row = {
        **_row(MeasuredOn("ipu", "C600", "c600"), differences=["x"]),
        "reason_code": "measured_another_way",
        "differences": ["batch 4, published at batch 40", "fp8 skip list not found"],
        "difference_codes": ["batch", "session"],
    }
    assert (
        glance.short_reason(row) == "on the C600, but another batch size, fp8 skip list not found"
    )


def test_a_row_an_older_kit_wrote_without_codes_reads_the_same(tmp_path, monkeypatch):
    """The summary JSON of an older kit holds rows without codes: glance reads their sentences."""
    monkeypatch.setenv("KIT_OUTPUTS", str(tmp_path))
    v1 = Path(__file__).parents[1] / "data" / "results_v1"
    card = scorecard.build(sorted(v1.glob("*.json"))).to_dict("records")
    for row in card:
        older = {k: v for k, v in row.items() if k not in CODED}
        for said in (
            glance.short_reason,
            glance.measured_device,
            glance.measured_class,
            glance.emulated,
        ):
            assert said(row) == said(older), (said.__name__, row["reason"])
