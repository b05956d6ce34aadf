"""The per-row search: the precision-class and numerics gates, the choice rule, and the decision
cache (key, reuse, invalidation), on a small export with short probes."""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import replace

import pytest

from kit.backends import Placement, reference_outputs
from kit.errors import InvalidParameter, UnknownValueError
from kit.hardware import onnxruntime_probe
from kit.results.windows import Noise
from kit.search import cache, choice, measuring, planning, row, runoff, sharing, wording
from kit.search.candidates import RowCandidate, native_16bit, row_candidates
from kit.search.context import SearchContext
from kit.search.cost import search_cost
from kit.search.decision import Decision, Plan
from kit.search.duels import Runoff
from kit.search.gate import numerics_gate, precision_gate
from kit.search.precision_map import PrecisionChoice
from kit.search.probe import Probe
from kit.studies.model_benchmark import Config

TINY = row.SearchSettings("quick", probe_s=0.05, min_count=2, warmup=0)
# where a decision's plan does not matter
SOME_PLAN = {"backend": "onnxruntime", "precision": "fp32"}
# emulated 16-bit types measured too
TINY_FULL = row.SearchSettings("full", probe_s=0.05, min_count=2, warmup=0)


@pytest.mark.parametrize(
    "precision,published,eligible",
    [
        ("bf16", "FP16", True),
        ("fp16", "FP16", True),  # a 16-bit type, even emulated
        ("fp32", "FP16", True),  # a higher precision: probed everywhere, wins only by being faster
        ("int8", "FP16", False),  # below the row's class
        ("int8", "FP8", True),
        ("bf16", "FP8", True),
        ("fp16", "FP8", True),
        ("fp32", "FP8", True),
        ("fp8", "FP8", True),
        ("fp8", "FP16", False),
    ],
)
def test_precision_gate_admits_the_published_class_and_every_higher_precision(
    precision, published, eligible
):
    reason = precision_gate(precision, published)
    assert (reason is None) is eligible
    if not eligible:
        assert precision in reason and "below" in reason


def test_precision_gate_rejects_unknown_names():
    with pytest.raises(
        UnknownValueError, match="published precision 'FP4'; known: FP16, FP32, FP8"
    ):
        precision_gate("fp32", "FP4")
    with pytest.raises(
        UnknownValueError, match="run precision 'int4'; known: bf16, fp16, fp32, fp8, int8"
    ):
        precision_gate("int4", "FP8")


def test_numerics_gate_is_relative_to_the_reference_and_per_class():
    assert numerics_gate("bf16", mean_abs=0.01, reference_scale=1.0).ok
    bad = numerics_gate("bf16", mean_abs=0.2, reference_scale=1.0)
    assert not bad.ok and "bf16" in bad.reason and bad.relative_error == pytest.approx(0.2)
    assert numerics_gate("int8", mean_abs=0.2, reference_scale=1.0).ok  # int8 is allowed more
    assert not numerics_gate("bf16", mean_abs=0.01, reference_scale=0.01).ok  # scale matters
    nan = numerics_gate("bf16", mean_abs=0.0, reference_scale=1.0, extra_nonfinite=3)
    assert not nan.ok and "NaN" in nan.reason


def test_candidates_follow_the_cpu_flags():
    bf16 = row_candidates("torch", "cpu", flags={"avx512_bf16", "avx512_vnni"}, cores=2)
    assert native_16bit(bf16) == ("bf16",)
    plain = row_candidates("torch", "cpu", flags={"avx2"}, cores=2)
    assert native_16bit(plain) == ()
    # a TF model has no torch bf16, but OpenVINO runs its ONNX export at bf16 natively
    assert native_16bit(row_candidates("tensorflow", "cpu", flags={"avx512_bf16"}, cores=2)) == (
        "bf16",
    )
    assert native_16bit(row_candidates("tensorflow", "cpu", flags={"avx2"}, cores=2)) == ()
    assert not any(
        c.placement.backend == "torch" for c in row_candidates("onnx", "cpu", flags=set(), cores=2)
    )
    with pytest.raises(InvalidParameter, match="ipu"):
        row_candidates("torch", "ipu")


def test_the_other_int8_method_is_a_full_search_candidate():
    cands = row_candidates("torch", "cpu", flags={"avx512_vnni"}, cores=2, int8_method="dynamic")
    other = [c for c in cands if c.placement.options.to_dict().get("quantization")]
    assert [(c.label, c.depth) for c in other] == [("onnxruntime int8 static-qdq (cpu)", "full")]
    assert other[0].native  # VNNI here
    none = row_candidates("torch", "cpu", flags={"avx512_vnni"}, cores=2)
    assert not any(c.placement.options.to_dict().get("quantization") for c in none)


def _probes(candidates, today):
    return [planning.to_probe(c, today) for c in candidates]


def test_quick_depth_skips_emulated_16bit_where_a_native_one_exists():
    today = PrecisionChoice(Placement("torch", "bf16", "cpu"), "mapping")
    cands = row_candidates("torch", "cpu", flags={"avx512_bf16"}, cores=2)
    probes = _probes(cands, today)
    planning.plan_probes(probes, cands, "FP16", native_16bit(cands), "quick")
    by = {p.label: p for p in probes}
    assert (
        by["onnxruntime fp16 (cpu)"].status == "not probed"
        and "emulated" in by["onnxruntime fp16 (cpu)"].reason
    )
    assert by["torch bf16 (cpu)"].status == "pending" and by["torch bf16 (cpu)"].today
    # fp32 is probed although bf16 is native: through ONNX Runtime and OpenVINO (torch eager: full
    # only)
    assert (
        by["onnxruntime fp32 (cpu)"].status == "pending"
        and by["openvino fp32 (cpu)"].status == "pending"
    )
    assert (
        by["torch fp32 (cpu)"].status == "not probed"
        and "slowest of the three" in by["torch fp32 (cpu)"].reason
    )
    assert by["openvino bf16 (cpu)"].status == "pending"
    assert (
        by["torch int8 (cpu)"].status == "not eligible"
        and by["openvino int8 (cpu)"].status == "not eligible"
    )
    assert by["torch bf16 compile (cpu)"].status == "not probed"
    assert by["openvino fp32 hint=THROUGHPUT (cpu)"].status == "not probed"
    full = _probes(cands, today)
    planning.plan_probes(full, cands, "FP16", native_16bit(cands), "full")
    assert {p.label: p.status for p in full}["onnxruntime fp16 (cpu)"] == "pending"
    assert {p.label: p.status for p in full}["torch bf16 compile (cpu)"] == "pending"
    assert {p.label: p.status for p in full}["torch fp32 (cpu)"] == "pending"
    fp32_today = _probes(cands, PrecisionChoice(Placement("torch", "fp32", "cpu"), "mapping"))
    planning.plan_probes(fp32_today, cands, "FP16", native_16bit(cands), "quick")
    # today's: always measured
    assert {p.label: p.status for p in fp32_today}["torch fp32 (cpu)"] == "pending"


def test_quick_depth_skips_emulated_16bit_where_no_16bit_type_is_native():
    """A CPU with neither avx512_bf16 nor avx512_fp16 (a Xeon here): every 16-bit type is fp32
    arithmetic with conversions, so a quick search measures fp32 (any FP16 row may run at it) and
    leaves the emulated types to a full search; today's mapping is measured whatever its type."""
    cands = row_candidates("torch", "cpu", flags={"avx512_vnni"}, cores=2)
    assert native_16bit(cands) == ()
    emulated = ("onnxruntime fp16 (cpu)", "torch bf16 (cpu)", "torch fp16 (cpu)")
    for published in ("FP16", "FP8"):
        probes = _probes(
            cands,
            PrecisionChoice(
                Placement("onnxruntime", "fp32" if published == "FP16" else "int8", "cpu"), ""
            ),
        )
        planning.plan_probes(probes, cands, published, (), "quick")
        by = {p.label: p for p in probes}
        for label in emulated:
            assert by[label].status == "not probed", (published, label)
            assert (
                "fp32 arithmetic with conversions" in by[label].reason
                and "any FP16 or FP8 row" in by[label].reason
            )
        assert by["onnxruntime fp32 (cpu)"].status == by["openvino fp32 (cpu)"].status == "pending"
    assert not any(
        c.placement.precision == "bf16" and c.placement.backend == "openvino" for c in cands
    )  # OpenVINO would run f32
    full = _probes(cands, PrecisionChoice(Placement("onnxruntime", "fp32", "cpu"), ""))
    planning.plan_probes(full, cands, "FP16", (), "full")
    assert all({p.label: p.status for p in full}[label] == "pending" for label in emulated)
    today16 = _probes(cands, PrecisionChoice(Placement("onnxruntime", "fp16", "cpu"), ""))
    planning.plan_probes(today16, cands, "FP16", (), "quick")
    assert {p.label: p.status for p in today16}["onnxruntime fp16 (cpu)"] == "pending"


def _measured(label, thr, low, high, today=False, precision="fp32", native=True):
    return Probe(
        label=label,
        placement=Placement.of("onnxruntime", precision, "cpu", {}, threads=None),
        native=native,
        why="",
        today=today,
        status="measured",
        throughput=thr,
        low=low,
        high=high,
        calls=5,
    )


def test_choice_takes_the_fastest_separated_candidate_and_states_the_ratio():
    today = PrecisionChoice(Placement("onnxruntime", "fp16", "cpu"), "mapping note")
    probes = [
        _measured("ort fp16", 1.16, 1.10, 1.20, today=True, precision="fp16", native=False),
        _measured("ort fp32", 1.41, 1.35, 1.47),
    ]
    d = choice.choose(probes, "FP16", today)
    assert d.chosen == "ort fp32" and d.ratio_vs_today == pytest.approx(1.41 / 1.16)
    assert d.separated and d.ratio_interval[0] == pytest.approx(1.35 / 1.20)
    assert (
        "fp32 stands in for FP16: faster here (1.41 vs 1.16 samples/s, 1.22x"
        in d.plan.precision_note
    )
    assert probes[0].status == "lost" and "0.82x" in probes[0].reason


def test_choice_keeps_todays_mapping_within_noise():
    today = PrecisionChoice(Placement("onnxruntime", "fp16", "cpu"), "mapping note")
    probes = [
        _measured("ort fp16", 1.16, 1.0, 1.3, today=True, precision="fp16"),
        _measured("ort fp32", 1.2, 1.1, 1.4),
    ]
    d = choice.choose(probes, "FP16", today)
    assert d.chosen == "ort fp16" and d.ratio_vs_today == 1.0
    assert "reaches below" in probes[1].reason


def test_choice_falls_back_to_todays_mapping_when_nothing_was_measured():
    today = PrecisionChoice(Placement("onnxruntime", "int8", "cpu"), "mapping note")
    p = _measured("ort int8", 1.0, 0.9, 1.1, today=True, precision="int8")
    p.status, p.throughput = "failed", None
    d = choice.choose([p], "FP8", today)
    assert (
        d.fallback
        and d.plan.placement.precision == "int8"
        and "no candidate" in d.plan.precision_note
    )


@pytest.fixture
def searchable(small, outputs, monkeypatch):
    """The small ResNet-50 with today's mapping pinned to ORT fp32, so the test is the same on any
    CPU."""
    monkeypatch.setenv("KIT_CACHE", str(outputs / "cache"))
    monkeypatch.setattr(
        row,
        "today_plan",
        lambda *a: PrecisionChoice(Placement("onnxruntime", "fp32", "cpu"), "pinned"),
    )
    # a quiet machine at the search's start, whatever else the test run does (pytest-xdist's other
    # worker would make it 'contended', and a contended decision is searched again once load drops)
    monkeypatch.setattr(row, "idle_sample", lambda: Noise())
    return small


def search_candidates() -> list[RowCandidate]:
    """Made once 'fake' is registered (a candidate's options are checked by its backend)."""
    return [
        RowCandidate.of("onnxruntime", "fp32"),
        RowCandidate.of("onnxruntime", "fp32", options={"graph_optimization": "ORT_ENABLE_BASIC"}),
        RowCandidate.of("onnxruntime", "fp16", native=False),
        # outputs of the wrong shape: fails, never stops the row
        RowCandidate.of("fake", "fp16", native=False),
        RowCandidate.of("torch", "int8"),
    ]


def test_search_measures_gates_and_caches(searchable, fake_backend):
    decision, reused = row.decide(
        searchable, "FP16", 2, "cpu", TINY_FULL, candidates=search_candidates()
    )
    assert not reused
    by = {p.label: p for p in decision.probes}
    assert by["torch int8 (cpu)"].status == "not eligible"
    assert (
        by["fake fp16 (cpu)"].status == "failed" and "output sizes" in by["fake fp16 (cpu)"].reason
    )
    measured = [p for p in decision.probes if p.throughput]
    # high is None where the interval of the mean call time reaches zero (outliers on a loaded
    # machine)
    assert len(measured) == 3 and all(
        p.low <= p.throughput <= (p.high or math.inf) for p in measured
    )
    assert by["onnxruntime fp16 (cpu)"].numerics["numerics_ok"]
    assert decision.chosen in by and by[decision.chosen].status == "chosen"
    assert decision.ratio_vs_today >= 1.0
    # the reference's outputs are left for the row's measurement (issue 50)
    assert reference_outputs.recall(searchable, 2, searchable.make_inputs(2, seed=0)) is not None
    again, reused = row.decide(
        searchable, "FP16", 2, "cpu", TINY_FULL, candidates=search_candidates()
    )
    assert reused and again.chosen == decision.chosen and again.created_at == decision.created_at


def test_a_fallback_candidate_is_measured_in_a_quick_search_only_where_its_first_choice_fails(
    searchable, fake_backend
):
    """NNCF's transformer preset stands in for its defaults (kit.search.candidates): a quick search
    measures it only where the defaults fail; a full search measures both."""
    # outputs of the wrong shape
    failing = [
        RowCandidate.of("onnxruntime", "fp32"),
        RowCandidate.of("fake", "int8"),
        RowCandidate.of("onnxruntime", "int8", fallback_for="fake int8 (cpu)"),
    ]
    d, _ = row.decide(searchable, "FP8", 1, "cpu", TINY, candidates=failing)
    by = {p.label: p for p in d.probes}
    assert by["fake int8 (cpu)"].status == "failed"
    assert (
        by["onnxruntime int8 (cpu)"].status in ("chosen", "lost")
        and by["onnxruntime int8 (cpu)"].throughput
    )
    passing = [
        RowCandidate.of("onnxruntime", "fp32"),
        RowCandidate.of("onnxruntime", "fp32", options={"graph_optimization": "ORT_ENABLE_BASIC"}),
        RowCandidate.of("fake", "int8", fallback_for="onnxruntime fp32 graph=BASIC (cpu)"),
    ]
    d, _ = row.decide(searchable, "FP8", 2, "cpu", TINY, candidates=passing)
    fallback = {p.label: p for p in d.probes}["fake int8 (cpu)"]
    assert fallback.status == "not probed" and fallback.calls == 0
    assert fallback.reason.startswith(
        "measured only where onnxruntime fp32 graph=BASIC (cpu) fails"
    )
    d, _ = row.decide(searchable, "FP8", 2, "cpu", TINY_FULL, candidates=passing)
    # measured, and failed
    assert {p.label: p for p in d.probes}["fake int8 (cpu)"].status == "failed"


def test_the_fp8_rows_search_takes_the_fp16_rows_probes_of_16_bits_or_more(searchable, monkeypatch):
    """kit.search.sharing: same model, batch, inputs and probe settings; today's mapping is measured
    again, the int8 candidate (FP8 only) measured, the others taken with where they came from."""
    cands = [
        RowCandidate.of("onnxruntime", "fp32"),
        RowCandidate.of("onnxruntime", "fp32", options={"graph_optimization": "ORT_ENABLE_BASIC"}),
        RowCandidate.of("onnxruntime", "int8"),
    ]
    fp16, _ = row.decide(searchable, "FP16", 2, "cpu", TINY, candidates=cands)
    fp8, _ = row.decide(searchable, "FP8", 2, "cpu", TINY, candidates=cands)
    theirs = {p.label: p for p in fp16.probes}
    mine = {p.label: p for p in fp8.probes}
    basic = "onnxruntime fp32 graph=BASIC (cpu)"
    assert fp8.shared_probes == 1 and fp8.shared_from == fp16.cache_file
    assert mine[basic].shared_from.startswith(f"the FP16 row's search ({fp16.cache_file}")
    assert [getattr(mine[basic], k) for k in sharing.COPIED] == [
        getattr(theirs[basic], k) for k in sharing.COPIED
    ]
    # its reason names the FP16 row's search (taken by it, or stopped early in it on a busy test
    # machine)
    assert "the FP16 row's search" in mine[basic].reason
    today = "onnxruntime fp32 (cpu)"
    assert mine[today].shared_from == "" and mine[today].throughput != theirs[today].throughput
    assert (
        mine["onnxruntime int8 (cpu)"].shared_from == ""
        and mine["onnxruntime int8 (cpu)"].throughput
    )
    assert theirs["onnxruntime int8 (cpu)"].status == "not eligible"
    # nothing is taken on a busy machine, with other probe settings, or when FORCE searches again
    monkeypatch.setattr(row, "idle_sample", lambda: Noise(noisy=True, reasons=("load",)))
    assert row.search_row(searchable, "FP8", 2, "cpu", TINY, candidates=cands).shared_probes == 0
    monkeypatch.setattr(row, "idle_sample", lambda: Noise())
    longer = row.SearchSettings("quick", probe_s=0.06, min_count=2, warmup=0)
    assert row.search_row(searchable, "FP8", 2, "cpu", longer, candidates=cands).shared_probes == 0
    forced = row.SearchSettings("quick", probe_s=0.05, min_count=2, warmup=0, force=True)
    assert row.search_row(searchable, "FP8", 2, "cpu", forced, candidates=cands).shared_probes == 0
    assert row.search_row(searchable, "FP8", 2, "cpu", TINY, candidates=cands).shared_probes == 1


def test_a_stopped_or_failed_probe_of_the_sibling_is_kept_lost_or_measured_again():
    today = PrecisionChoice(Placement("onnxruntime", "int8", "cpu"), "m")
    cands = [
        RowCandidate.of("onnxruntime", "int8"),
        RowCandidate.of("openvino", "fp32"),
        RowCandidate.of("torch", "fp32"),
        RowCandidate.of("openvino", "int8"),
    ]
    probes = _probes(cands, today)
    for p in probes:
        p.status = "pending"
    fields = {
        "backend": "onnxruntime",
        "precision": "fp32",
        "device": "cpu",
        "options": {},
        "threads": None,
        "native": True,
        "why": "",
    }
    stopped = {
        **fields,
        "label": "openvino fp32 (cpu)",
        "status": "lost",
        "reason": "stopped early: 1 samples/s",
        "stopped_early": True,
        "throughput": 1.0,
        "low": 0.9,
        "high": 1.1,
        "calls": 2,
        "load_s": 0.5,
        "compile_s": 0.25,
        "numerics": {"numerics_ok": True},
    }
    failed = {
        **fields,
        "label": "torch fp32 (cpu)",
        "status": "failed",
        "reason": "RuntimeError",
        "throughput": None,
    }
    int8 = {
        **stopped,
        "label": "openvino int8 (cpu)",
        "status": "chosen",
        "reason": "",
        "stopped_early": False,
        "throughput": 10.0,
        "low": 9.0,
        "high": 11.0,
    }
    today_there = {**stopped, "label": "onnxruntime int8 (cpu)", "status": "lost", "reason": "0.5x"}
    sibling = Decision.from_dict(
        {
            "published": "FP16",
            "cache_file": "f.json",
            "created_at": "t",
            "plan": SOME_PLAN,
            "probes": [stopped, failed, int8, today_there],
        }
    )
    assert sharing.borrow(probes, sibling, "FP8") == 1
    by = {p.label: p for p in probes}
    assert by["openvino fp32 (cpu)"].status == "lost" and by[
        "openvino fp32 (cpu)"
    ].reason.startswith("in the FP16 row's search (f.json, t): stopped early")
    # its figures too
    assert (by["openvino fp32 (cpu)"].load_s, by["openvino fp32 (cpu)"].compile_s) == (0.5, 0.25)
    assert by["torch fp32 (cpu)"].status == "pending"  # failed there: measured again here
    assert by["openvino int8 (cpu)"].status == "pending"  # 8 bits: never shared
    assert by["onnxruntime int8 (cpu)"].status == "pending" and by["onnxruntime int8 (cpu)"].today
    again = _probes(cands, today)
    for p in again:
        p.status = "pending"
    relayed = replace(
        sibling,
        probes=[
            Probe.from_dict({**stopped, "shared_from": "the FP8 row's search (old.json, t0)"}),
            Probe.from_dict(int8),
        ],
    )
    assert sharing.borrow(again, relayed, "FP8") == 1
    # where it was measured, not the relay
    assert again[1].shared_from == "the FP8 row's search (old.json, t0)"


def test_a_probe_the_fp8_row_stopped_against_its_int8_leader_is_measured_again_in_the_fp16_row():
    """Found by `make bench-peers` (the FP8 row searched first): the FP16 row took OpenVINO bf16
    (178/s, stopped early against the FP8 row's int8 leader, 323/s) as lost and chose OpenVINO
    fp32 at 35/s. A probe stays lost only where what stopped it may run the row too."""
    fields = {"device": "cpu", "options": {}, "threads": None, "native": True, "why": ""}

    def probe(label, precision, status, rate, reason="", backend="openvino"):
        return {
            **fields,
            "label": label,
            "backend": backend,
            "precision": precision,
            "status": status,
            "reason": reason,
            "stopped_early": reason.startswith("stopped early"),
            "throughput": rate,
            "low": rate * 0.95,
            "high": rate * 1.05,
            "calls": 12,
            "numerics": {"numerics_ok": True},
        }

    stopped = "stopped early: ... below 0.7 x the low end of the leader so far"
    fp8 = Decision.from_dict(
        {
            "published": "FP8",
            "cache_file": "fp8.json",
            "created_at": "t",
            "plan": SOME_PLAN,
            "probes": [
                probe("openvino int8 (cpu)", "int8", "chosen", 323.0),
                probe("openvino bf16 (cpu)", "bf16", "lost", 178.0, stopped),
                probe("openvino fp32 (cpu)", "fp32", "lost", 31.5, stopped),
            ],
        }
    )
    today = PrecisionChoice(Placement("onnxruntime", "fp32", "cpu"), "m")
    cands = [RowCandidate.of("openvino", "bf16"), RowCandidate.of("openvino", "fp32")]
    probes = _probes(cands, today)
    for p in probes:
        p.status = "pending"
    # FP16: the int8 leader that stopped both is not this row's: both measured again
    assert sharing.borrow(probes, fp8, "FP16") == 0
    assert {p.label: p.status for p in probes if p.label.startswith("openvino")} == {
        "openvino bf16 (cpu)": "pending",
        "openvino fp32 (cpu)": "pending",
    }
    # bf16 measured in full there (it lost to int8 only at the end): fp32 lost to it too
    fp8.probes[1] = Probe.from_dict(probe("openvino bf16 (cpu)", "bf16", "lost", 178.0, "0.55x"))
    for p in probes:
        p.status = "pending"
    assert sharing.borrow(probes, fp8, "FP16") == 2
    by = {p.label: p for p in probes}
    assert by["openvino bf16 (cpu)"].status == "measured"
    assert by["openvino fp32 (cpu)"].status == "lost"  # 31.5 < 0.7 x bf16's 169
    assert by["openvino fp32 (cpu)"].stopped_early  # a scout still, for the next borrower
    # named by what stops it in this row, not the FP8 row's int8 leader
    assert (
        "below 0.7 x the low end of openvino bf16 (cpu) there (169)"
        in by["openvino fp32 (cpu)"].reason
    )
    # the FP8 row itself may choose int8: what int8 stopped stays lost there
    int8_only = replace(
        fp8, probes=[Probe.from_dict(probe("openvino int8 (cpu)", "int8", "chosen", 323.0))]
    )
    bf16 = Probe.from_dict(probe("openvino bf16 (cpu)", "bf16", "lost", 178.0, stopped))
    assert sharing.stopped_by(bf16, int8_only, "FP8", {"openvino int8 (cpu)"}) is not None
    # ... unless this row does not measure it (not probed here): then bf16 is measured again
    assert sharing.stopped_by(bf16, int8_only, "FP8", set()) is None


def test_a_scout_relayed_through_a_second_search_stays_a_scout():
    """Found in review: a stopped probe taken by the FP8 row carried a reason that no longer began
    'stopped early', so a later FP16 search took the scout as a full probe. The flag travels."""
    fields = {"device": "cpu", "options": {}, "threads": None, "native": True, "why": ""}
    scout = {
        **fields,
        "label": "openvino fp32 (cpu)",
        "backend": "openvino",
        "precision": "fp32",
        "status": "lost",
        "reason": "in the FP16 row's search (a.json, t): stopped early: ...",
        "stopped_early": True,
        "throughput": 30.0,
        "low": 28.0,
        "high": 32.0,
        "calls": 3,
    }
    fp8 = Decision.from_dict(
        {
            "published": "FP8",
            "cache_file": "b.json",
            "created_at": "t",
            "plan": SOME_PLAN,
            "probes": [scout],
        }
    )
    today = PrecisionChoice(Placement("onnxruntime", "fp32", "cpu"), "m")
    probes = _probes([RowCandidate.of("openvino", "fp32")], today)
    for p in probes:
        p.status = "pending"
    assert sharing.borrow(probes, fp8, "FP16") == 0  # nothing measured in full stops it there
    assert {p.label: p.status for p in probes}["openvino fp32 (cpu)"] == "pending"


def test_nncf_transformer_preset_is_a_candidate_for_transformers_only():
    def ov_int8(method):
        return [
            (c.label, c.fallback_for)
            for c in row_candidates(
                "torch", "cpu", flags={"avx512_vnni"}, cores=2, int8_method=method
            )
            if c.placement.backend == "openvino" and c.placement.precision == "int8"
        ]

    assert ov_int8("dynamic") == [
        ("openvino int8 (cpu)", ""),
        ("openvino int8 nncf=transformer (cpu)", "openvino int8 (cpu)"),
    ]
    assert ov_int8("static-qdq") == ov_int8(None) == [("openvino int8 (cpu)", "")]


def test_torch_int8_stands_in_for_openvino_int8_in_a_quick_search():
    """torch's dynamic int8 lost to NNCF int8 on every FP8 row measured: a quick search measures it
    only where OpenVINO int8 fails (a full search always), and says why."""
    cands = row_candidates("torch", "cpu", flags={"avx512_vnni"}, cores=2)
    by = {c.label: c for c in cands}
    assert (
        by["torch int8 (cpu)"].fallback_for == "openvino int8 (cpu)"
        and by["openvino int8 (cpu)"].fallback_for == ""
    )
    assert "only where OpenVINO int8 fails" in by["torch int8 (cpu)"].why
    assert not any(
        c.placement.backend == "torch"
        for c in row_candidates("onnx", "cpu", flags={"avx512_vnni"}, cores=2)
    )


def test_search_cost_counts_only_the_rows_own_loads():
    probes = [
        _measured("a", 1, 1, 1),
        _measured("b", 1, 1, 1),
        _measured("c", 1, 1, 1),
        _measured("ref", 1, 1, 1),
    ]
    for p, load_s in zip(probes, (40.0, 2.0, 30.0, None), strict=True):
        p.load_s = load_s
    probes[2].shared_from = "the FP16 row's search"
    plan = Plan(Placement("onnxruntime", "fp32", "cpu"))

    def decision(**k):
        return Decision(chosen="a", today="a", plan=plan, probes=probes, **k)

    assert search_cost(decision(searched_s=60.0)) == (
        "searched in 60 s: 42 s of it loading 2 candidates (the longest: a, 40 s); 1 probe taken "
        "from the sibling row"
    )
    assert (
        search_cost(Decision(chosen="a", today="a", plan=plan, searched_s=5.0, probes=probes[3:]))
        == "searched in 5 s"
    )
    assert search_cost(decision()) == "the search's time was not recorded"


def test_cache_is_keyed_and_force_or_a_new_key_searches_again(searchable, monkeypatch):
    cands = [RowCandidate.of("onnxruntime", "fp32")]
    first, _ = row.decide(searchable, "FP16", 1, "cpu", TINY, candidates=cands)
    forced, reused = row.decide(
        searchable,
        "FP16",
        1,
        "cpu",
        row.SearchSettings("quick", probe_s=0.05, min_count=2, warmup=0, force=True),
        candidates=cands,
    )
    assert not reused and forced.created_at >= first.created_at
    assert row.decide(searchable, "FP16", 1, "cpu", TINY, candidates=cands)[1]  # reused again
    settled_elsewhere = replace(TINY, settle_batch=8)  # made another way: searched again
    assert not row.decide(searchable, "FP16", 1, "cpu", settled_elsewhere, candidates=cands)[1]
    assert not row.decide(searchable, "FP16", 1, "cpu", TINY, candidates=cands)[1]
    # another batch size
    assert not row.decide(searchable, "FP16", 2, "cpu", TINY, candidates=cands)[1]
    monkeypatch.setattr(cache, "SEARCH_VERSION", cache.SEARCH_VERSION + 1)  # new software key
    assert not row.decide(searchable, "FP16", 1, "cpu", TINY, candidates=cands)[1]


def test_a_decision_made_with_another_settle_batch_is_not_reused(searchable):
    """A GPU decides each batch on its own (no settle batch), a CPU's quick search settles a near
    tie at the largest published batch: a decision made one way (e.g. by an older peer bench) is not
    the one a job of the other asks for, though the key is the same."""
    key = cache.decision_key(searchable.name, "FP16", 4, "cuda", small=True)
    cache.store_decision(
        Decision.from_dict(
            {"key": key, "depth": "quick", "plan": SOME_PLAN, "settings": {"settle_batch": 32}}
        )
    )
    assert cache.load_decision(key, "quick", settle_batch=None) is None
    assert cache.load_decision(key, "quick", settle_batch=32) is not None
    # a sibling row's probes: whatever settled it
    assert cache.load_decision(key, "quick") is not None
    # an older file: no settings
    cache.store_decision(Decision.from_dict({"key": key, "depth": "quick", "plan": SOME_PLAN}))
    assert cache.load_decision(key, "quick", settle_batch=None) is not None


def test_a_quick_decision_does_not_serve_a_full_search(searchable):
    key = cache.decision_key(searchable.name, "FP16", 1, "cpu", small=True)
    cache.store_decision(Decision.from_dict({"key": key, "depth": "quick", "plan": SOME_PLAN}))
    assert cache.load_decision(key, "quick") is not None
    assert cache.load_decision(key, "full") is None
    cache.store_decision(Decision.from_dict({"key": key, "depth": "full", "plan": SOME_PLAN}))
    assert cache.load_decision(key, "quick") is not None
    other = cache.decision_key(searchable.name, "FP8", 1, "cpu", small=True)
    assert (
        cache.decision_path(other) != cache.decision_path(key)
        and cache.load_decision(other) is None
    )


def test_settings_are_validated():
    with pytest.raises(InvalidParameter, match="deep"):
        row.SearchSettings("deep")
    with pytest.raises(InvalidParameter, match="min_count"):
        row.SearchSettings(min_count=1)
    with pytest.raises(InvalidParameter, match="settle_batch"):
        row.SearchSettings(settle_batch=0)
    assert Config(batch_sizes=[4, 32], search=True).search_settings().settle_batch == 32


def _stored_plan(model: str, published: str, batch: int, plan: dict, small: bool = False) -> dict:
    key = cache.decision_key(model, published, batch, "cpu", small=small)
    probe = Probe(
        label="fake int8 (cpu)",
        placement=Placement.of(plan["backend"], plan["precision"], "cpu"),
        native=True,
        why="",
        status="chosen",
        throughput=9.0,
        low=8.0,
        high=10.0,
        calls=5,
        load_s=1.25,
    )
    decision = {
        "key": key,
        "depth": "full",
        "searched_s": 3.5,
        "chosen": probe.label,
        "today": "onnxruntime int8 (cpu)",
        "fallback": False,
        "plan": plan,
        "ratio_vs_today": 1.2,
        "probes": [probe.to_dict()],
    }
    cache.store_decision(Decision.from_dict(decision))
    return decision


def test_model_benchmark_runs_the_cached_decision_and_reports_the_search(
    outputs, fake_backend, small, monkeypatch
):
    from kit.publish.report import search_table
    from kit.publish.scorecard import measured_hardware
    from kit.studies import model_benchmark

    monkeypatch.setenv("KIT_CACHE", str(outputs / "cache"))
    monkeypatch.setattr("kit.models.export_model", lambda *a, **k: small)
    monkeypatch.setattr(model_benchmark, "load_model", lambda *a, **k: small)
    plan = {
        "backend": "fake",
        "precision": "int8",
        "device": "cpu",
        "options": {"compile": True},
        "threads": None,
        "precision_note": "chosen by the per-row search: fake int8",
    }
    _stored_plan(small.name, "FP8", 2, plan, small=True)
    result = model_benchmark.run(
        dict(
            model=small.name,
            small=True,
            published_precision="FP8",
            backend="onnxruntime",
            precision="int8",
            batch_sizes=[1, 2],
            search=True,
            check_numerics=False,
            accuracy=False,
            roofline=False,
            warmup=0,
            min_duration_s=0.01,
            min_count=2,
        )
    )
    assert result.status == "ok", result.errors
    assert result.backend.name == "fake" and result.backend.options == {"compile": True}
    assert result.tables.to_dict()["search_decision"]["reused"] is True
    assert any("chosen by the per-row search: fake int8" in n for n in result.notes)
    assert any(
        "searched in 3.5 s: 1.25 s of it loading 1 candidate (the longest: fake int8 (cpu), 1.25 s)"
        in n
        for n in result.notes
    )
    table = search_table(result)
    assert list(table["candidate"]) == ["fake int8 (cpu)"] and table["status"].iloc[0] == "chosen"
    assert "compiled, chosen by search" in measured_hardware(result)


def test_profile_jobs_search_their_row_and_carry_the_decision_key_not_the_plan(
    outputs, monkeypatch
):
    """Issue 26: the decision is made (or reused) once, by the job; the plan only names its key, so
    a stored decision never changes the job's parameters, while other hardware or software would."""
    from kit.batch.profiles import jobs_for
    from kit.search import key_hash

    monkeypatch.setenv("KIT_CACHE", str(outputs / "cache"))
    jobs = {j.name: j.parameters for j in jobs_for("quick", "cpu")}
    bert = jobs["bert-torch-fp32_FP16"]
    assert bert["search"] is True and bert["search_depth"] == "quick" and "search_force" not in bert
    plan = {
        "backend": "onnxruntime",
        "precision": "fp16",
        "device": "cpu",
        "options": {"graph_optimization": "ORT_ENABLE_EXTENDED"},
        "threads": 1,
        "precision_note": "searched",
    }
    stored = _stored_plan("bert-torch-fp32", "FP16", bert["search_batch"], plan)
    again = {j.name: j.parameters for j in jobs_for("quick", "cpu")}["bert-torch-fp32_FP16"]
    assert again == bert and again["search_key"] == key_hash(stored["key"])
    forced = {j.name: j.parameters for j in jobs_for("quick", "cpu", research=True)}[
        "bert-torch-fp32_FP16"
    ]
    assert forced["search_force"] is True and forced["precision_note"] != "searched"
    assert (
        "search"
        not in {j.name: j.parameters for j in jobs_for("quick", "ipu")}["bert-torch-fp32_FP16"]
    )
    plain = {j.name: j.parameters for j in jobs_for("quick", "cpu", search=False)}[
        "bert-torch-fp32_FP16"
    ]
    assert (
        not {"search", "search_key", "search_batch"} & set(plain)
        and plain["backend"] == bert["backend"]
    )
    # a quick search measures at a small batch where calls are slow, at the published one where
    # cheap
    assert (
        jobs["roformer-tf-fp32_FP16"]["search_batch"] == 1
        and max(jobs["roformer-tf-fp32_FP16"]["batch_sizes"]) == 12
    )
    assert (
        jobs["widedeep-tf-fp32_FP16"]["search_batch"]
        == max(jobs["widedeep-tf-fp32_FP16"]["batch_sizes"])
        == 20000
    )


def test_a_models_fp16_row_is_searched_before_its_fp8_row():
    """The FP8 row's search takes the FP16 row's probes (kit.search.sharing), so the FP16 job runs
    first; the table's model order is kept."""
    from kit.batch.profiles import jobs_for

    names = [
        j.name
        for j in jobs_for("quick", "cpu")
        if j.name.startswith(("bert-", "resnet50-", "swin-large-"))
    ]
    assert names == [
        "bert-torch-fp32_FP16",
        "bert-torch-fp32_FP8",
        "resnet50-torch-fp32_FP16",
        "resnet50-torch-fp32_FP8",
        "swin-large-torch-fp32_FP16",
        "swin-large-torch-fp32_FP8",
    ]


def test_reproduce_search_0_is_on_the_command_line_and_in_the_jobs():
    """`make reproduce SEARCH=0`: the rows at the published-precision mapping, and the batch's
    recorded command says so (a rerun makes the same batch)."""
    import argparse

    from kit.cli.reproduce import command_line, register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["reproduce", "--search", "0"])
    assert command_line(args, "cpu") == "kit reproduce --profile quick --hardware cpu --search 0"
    assert (
        command_line(parser.parse_args(["reproduce"]), "cpu")
        == "kit reproduce --profile quick --hardware cpu"
    )
    with pytest.raises(SystemExit):
        parser.parse_args(["reproduce", "--search", "off"])


def test_a_search_that_cannot_start_keeps_todays_mapping(outputs, fake_backend, small, monkeypatch):
    from kit.errors import CorruptModel
    from kit.studies import model_benchmark

    monkeypatch.setattr(model_benchmark, "load_model", lambda *a, **k: small)

    def broken(*a, **k):
        raise CorruptModel("ONNX Runtime cannot load it")

    monkeypatch.setattr(model_benchmark, "decide", broken)
    result = model_benchmark.run(
        dict(
            model=small.name,
            small=True,
            backend="fake",
            batch_sizes=[1],
            search=True,
            check_numerics=False,
            accuracy=False,
            roofline=False,
            warmup=0,
            min_duration_s=0.01,
            min_count=2,
        )
    )
    assert result.status == "ok" and result.backend.name == "fake"
    assert any("search not completed" in n and "cannot load" in n for n in result.notes)


def test_a_decision_searched_under_contention_is_searched_again_once_quiet(outputs, monkeypatch):
    monkeypatch.setenv("KIT_CACHE", str(outputs / "cache"))
    key = cache.decision_key("bert-torch-fp32", "FP16", 1, "cpu")
    cache.store_decision(
        Decision.from_dict(
            {
                "key": key,
                "depth": "quick",
                "plan": SOME_PLAN,
                "contended": True,
                "load_average": 9.0,
            }
        )
    )
    busy = cache.usable_cpus() + 4.0
    assert cache.load_decision(key, load_now=busy) is not None  # still contended: reuse
    assert cache.load_decision(key, load_now=0.1) is None  # quiet now: search again
    cache.store_decision(
        Decision.from_dict({"key": key, "depth": "quick", "plan": SOME_PLAN, "contended": False})
    )
    assert cache.load_decision(key, load_now=0.1) is not None


def test_the_interval_has_no_upper_bound_when_the_mean_call_time_could_be_zero():
    from kit.measure.window import BatchMeasurement
    from kit.search.probe import throughput_interval

    steady = BatchMeasurement(
        batch_size=2,
        mode="single",
        threads=1,
        calls=[[(0, 10_000_000), (10_000_000, 20_000_000), (20_000_000, 31_000_000)]],
    )
    thr, low, high = throughput_interval(steady)
    assert low < thr < high
    spiky = BatchMeasurement(
        batch_size=2,
        mode="single",
        threads=1,
        calls=[[(0, 1_000), (1_000, 2_000), (2_000, 900_000_000)]],
    )
    thr, low, high = throughput_interval(spiky)
    assert high is None and 0 < low < thr
    a = _measured("a", 10.0, 9.0, 11.0)
    b = _measured("b", 5.0, 4.0, None)
    assert not choice.separated(a, b) and choice.clearly_faster(a, b)


def test_a_static_int8_over_the_memory_budget_is_not_probed(small, monkeypatch):
    today = PrecisionChoice(Placement("onnxruntime", "int8", "cpu"), "mapping")
    cands = [
        RowCandidate.of("onnxruntime", "int8"),
        RowCandidate.of(
            "onnxruntime", "int8", options={"quantization": "static-qdq"}, depth="full"
        ),
    ]
    probes = _probes(cands, today)
    planning.plan_probes(probes, cands, "FP8", (), "full")
    planning.skip_over_memory_budget(probes, small)
    assert [p.status for p in probes] == ["pending", "pending"]  # a small file: calibration fits
    monkeypatch.setattr("kit.search.planning.estimate_need", lambda step, size: 3 * size + 3e9)
    probes = _probes(cands, today)
    planning.plan_probes(probes, cands, "FP8", (), "full")
    planning.skip_over_memory_budget(probes, small)
    assert probes[0].status == "pending"  # the graph's own method is never skipped here
    assert (
        probes[1].status == "not probed"
        and "over the" in probes[1].reason
        and "GB" in probes[1].reason
    )


def test_openvino_candidates_follow_the_cpu_flags_on_every_framework():
    def ov(flags):
        return {
            (c.placement.precision, c.depth, c.placement.options.to_dict().get("hint"))
            for c in row_candidates("onnx", "cpu", flags=flags, cores=2)
            if c.placement.backend == "openvino"
        }

    assert ov({"avx512_bf16", "avx512_vnni"}) == {
        ("fp32", "quick", None),
        ("bf16", "quick", None),
        ("int8", "quick", None),
        ("fp32", "full", "THROUGHPUT"),
        ("bf16", "full", "THROUGHPUT"),
    }
    assert ("fp16", "quick", None) in ov({"avx512_bf16", "avx512_fp16"})
    assert {p for p, _, _ in ov({"avx2"})} == {"fp32", "int8"}  # no silent f32 called bf16


def _at_batch_1(window) -> SearchContext:
    """A search at batch 1 whose sessions are the test's own (no model, no inputs)."""
    return SearchContext(model=None, inputs={}, batch=1, window=window)


class _SleepySession:
    """A session whose every call takes `call_s` (the kit's own timed window times it)."""

    def __init__(self, call_s: float):
        self.call_s = call_s

    def measure_window(self, inputs, batch, cfg, sampler=None):
        import time

        from kit.measure.window import timed_window

        return timed_window([lambda: time.sleep(self.call_s)], batch, cfg, sampler)


def test_a_clearly_losing_candidate_is_stopped_early_and_a_close_one_is_timed_in_full(monkeypatch):
    mcfg = row.SearchSettings("quick", probe_s=0.2, min_count=2).measure_config()
    leader = _measured("leader", 1000.0, 990.0, 1010.0)
    slow = _measured("slow", 0.0, 0.0, 0.0)
    slow.status, slow.throughput = "pending", None
    stopped, scout = measuring.scout_window(_at_batch_1(mcfg), slow, leader, _SleepySession(0.02))
    assert stopped and scout.latency.count == slow.calls
    assert (
        slow.status == "lost" and slow.reason.startswith("stopped early") and slow.throughput < 100
    )
    assert slow.calls >= 2
    assert not all(_close_one_stopped(mcfg) for _ in range(3))  # a busy machine only slows it
    unbounded = _measured("unbounded", 0.0, 0.0, 0.0)
    unbounded.status, unbounded.throughput = "pending", None
    original = measuring.record_timing

    def no_upper_end(p, *m):
        original(p, *m)
        p.high = None  # a short interval whose mean call time could be zero: never stopped

    monkeypatch.setattr(measuring, "record_timing", no_upper_end)
    assert not measuring.scout_window(_at_batch_1(mcfg), unbounded, leader, _SleepySession(0.02))[0]


def _close_one_stopped(mcfg) -> bool:
    """Whether a 50/s candidate is stopped against a 30/s leader: never where the machine is quiet;
    its sleeps oversleep only on a busy one, so one quiet try of three shows the rule."""
    close = _measured("close", 0.0, 0.0, 0.0)
    close.status, close.throughput = "pending", None
    close_leader = _measured("leader", 30.0, 28.0, 32.0)
    stopped, _ = measuring.scout_window(
        _at_batch_1(mcfg), close, close_leader, _SleepySession(0.02)
    )
    return stopped


def test_one_long_call_scouts_on_a_quiet_machine_with_a_stated_margin():
    """A call longer than the scout's share is a scout on its own (quiet machines): taken as up to
    ONE_CALL_SPREAD slow, it stops only below STOP_BELOW / (1 + spread) of the leader's low end."""
    mcfg = row.SearchSettings("quick", probe_s=0.2, min_count=3).measure_config()  # scout: 0.05 s
    leader = _measured("leader", 100.0, 95.0, 105.0)
    slow = _measured("slow", 0.0, 0.0, 0.0)
    stopped, scout = measuring.scout_window(
        _at_batch_1(mcfg), slow, leader, _SleepySession(0.1), min_count=1
    )
    assert stopped and scout.latency.count == slow.calls == 1
    assert "over 1 call (the first call: nan), the faster taken as up to 25% slow" in slow.reason
    assert slow.status == "lost"
    edge = measuring.STOP_BELOW * 95.0 / (1 + measuring.ONE_CALL_SPREAD)
    for thr, first, stops in (
        (edge * 0.99, None, True),
        (edge * 1.01, None, False),
        (edge * 0.5, edge * 0.9, True),
        (edge * 0.5, edge * 1.01, False),
    ):
        one = _measured("one", thr, math.nan, math.nan)
        one.calls, one.first_call = 1, first
        assert measuring.stop_early(one, leader) is stops  # one slow call alone never stops it
    contended = _measured("contended", 0.0, 0.0, 0.0)
    # min_count 2 by default
    measuring.scout_window(_at_batch_1(mcfg), contended, leader, _SleepySession(0.1))
    assert contended.calls == 2


def test_the_reference_is_scouted_and_timed_in_full_only_where_it_comes_close(
    searchable, monkeypatch
):
    """ORT fp32 (the reference) is scouted on the session that made the reference outputs; at the
    end it is stopped early where it clearly lost to the fastest other candidate, else timed in full
    on a fresh session."""
    from kit.measure.window import BatchMeasurement

    mcfg = row.SearchSettings("quick", probe_s=0.05, min_count=4).measure_config()
    scout = BatchMeasurement(
        batch_size=1,
        mode="single",
        threads=1,
        calls=[[(0, 100_000_000), (100_000_000, 200_000_000)]],
    )  # 2 calls, 10/s
    ref = _measured("onnxruntime fp32 (cpu)", 0.0, 0.0, 0.0)
    measuring.record_timing(ref, scout)
    no_load = SearchContext(model=None, inputs={}, batch=1, window=mcfg)
    measuring.settle_reference(no_load, ref, scout, [ref, _measured("fast", 100.0, 95.0, 105.0)])
    assert ref.status == "lost" and ref.reason.startswith("stopped early") and ref.calls == 2
    close = _measured("onnxruntime fp32 (cpu)", 0.0, 0.0, 0.0)
    measuring.record_timing(close, scout)
    inputs = searchable.make_inputs(1)
    ctx = SearchContext(model=searchable, inputs=inputs, batch=1, window=mcfg)
    measuring.settle_reference(ctx, close, scout, [close, _measured("fast", 12.0, 11.0, 13.0)])
    # the scout's 2 and the rest
    assert close.status == "measured" and close.calls >= 4 and close.throughput > 10.0
    # in a search: scouted (and settled at the end) unless it is today's mapping, then timed in full
    settled = []
    monkeypatch.setattr(
        measuring, "settle_reference", lambda ctx, p, *a: settled.append((p.label, p.calls))
    )
    cands = [
        RowCandidate.of("onnxruntime", "fp32"),
        RowCandidate.of("onnxruntime", "fp32", options={"graph_optimization": "ORT_ENABLE_BASIC"}),
    ]
    for today, scouted in (
        (PrecisionChoice(Placement("torch", "bf16", "cpu"), "x"), True),
        (PrecisionChoice(Placement("onnxruntime", "fp32", "cpu"), "x"), False),
    ):
        probes, settled[:] = _probes(cands, today), []
        for p in probes:
            p.status = "pending"
        settings = row.SearchSettings("quick", probe_s=0.4, min_count=3)  # scout: 0.1 s
        measuring.measure_all(
            SearchContext(
                model=searchable, inputs=inputs, batch=1, window=settings.measure_config()
            ),
            probes,
            quiet=True,
        )
        assert [label for label, _ in settled] == (["onnxruntime fp32 (cpu)"] if scouted else [])
        assert probes[0].calls >= 3 or scouted  # today's mapping: the whole probe


def test_a_probe_records_its_first_calls_throughput_in_samples_per_second(searchable, monkeypatch):
    """first_call is batch / the numerics call's seconds: 4 samples in a call of at least 50 ms."""
    import time

    import numpy as np

    ref_out = [np.ones((4, 3), dtype=np.float32)]

    class Session(_SleepySession):
        description: dict = {}

        def run(self, inputs):
            time.sleep(self.call_s)
            return [o.copy() for o in ref_out]

        def close(self):
            pass

    class Backend:
        def load(self, model, config, batch):
            return Session(0.05)

    monkeypatch.setattr(measuring, "require_backend", lambda name: Backend())
    p = _measured("sleepy", 0.0, 0.0, 0.0)
    p.status = "pending"
    ctx = SearchContext(
        model=searchable,
        inputs={},
        batch=4,
        window=row.SearchSettings("quick", probe_s=0.05, min_count=2).measure_config(),
    )
    measuring.probe_one(ctx, p, measuring.Reference(ref_out, 1.0, 0))
    assert p.status == "measured" and 4 / 0.05 / 2 < p.first_call <= 4 / 0.05


def test_a_reference_whose_full_probe_fails_is_never_chosen_on_its_scout(searchable, monkeypatch):
    from kit.measure.window import BatchMeasurement

    # one call: 100 samples/s
    scout = BatchMeasurement(batch_size=1, mode="single", threads=1, calls=[[(0, 10_000_000)]])
    ref = _measured("onnxruntime fp32 (cpu)", 0.0, 0.0, 0.0)
    measuring.record_timing(ref, scout)

    def unloadable(name):
        raise RuntimeError("out of memory")

    monkeypatch.setattr(measuring, "require_backend", unloadable)
    ctx = SearchContext(
        model=searchable, inputs={}, batch=1, window=row.SearchSettings("quick").measure_config()
    )
    measuring.settle_reference(ctx, ref, scout, [ref, _measured("slow", 10.0, 9.0, 11.0)])
    assert (
        ref.status == "failed" and "full probe failed (RuntimeError: out of memory)" in ref.reason
    )
    assert "its scout: 100 samples/s over 1 call" in ref.reason


def test_a_scout_that_goes_on_counts_towards_the_probe():
    """A candidate not stopped early keeps its scout's calls: the rest of the probe times only what
    the minimums still ask for, and the figure covers every call."""
    from kit.measure.window import BatchMeasurement, MeasureConfig
    from kit.search.probe import throughput_interval

    mcfg = MeasureConfig(warmup=0, min_duration_s=1.0, min_count=3)
    scout = BatchMeasurement(
        batch_size=4,
        mode="single",
        threads=1,
        calls=[[(0, 200_000_000), (200_000_000, 400_000_000)]],
    )
    rest = measuring.rest_config(mcfg, scout)
    assert rest.min_count == 1 and rest.min_duration_s == pytest.approx(0.6) and rest.warmup == 0
    assert measuring.rest_config(mcfg, None) is mcfg
    long_scout = BatchMeasurement(
        batch_size=4,
        mode="single",
        threads=1,
        calls=[
            [(0, 2_000_000_000), (2_000_000_000, 4_000_000_000), (4_000_000_000, 6_000_000_000)]
        ],
    )
    assert (
        measuring.rest_config(mcfg, long_scout).min_duration_s == 0.0
        and measuring.rest_config(mcfg, long_scout).min_count == 1
    )
    tail = BatchMeasurement(
        batch_size=4, mode="single", threads=1, calls=[[(500_000_000, 750_000_000)]]
    )  # one call of 0.25 s
    thr, low, high = throughput_interval(scout, tail)
    # 12 samples over the windows' 0.65 s, not the gap between them
    assert thr == pytest.approx(12 / 0.65)
    assert low < thr < high
    p = _measured("p", 0.0, 0.0, 0.0)
    measuring.record_timing(p, scout, tail)
    assert p.calls == 3 and p.throughput == pytest.approx(12 / 0.65)
    assert throughput_interval(scout)[0] == pytest.approx(20.0)


def test_a_higher_precision_that_wins_says_it_stands_in_with_both_throughputs():
    today = PrecisionChoice(Placement("torch", "bf16", "cpu"), "mapping")
    probes = [
        _measured("torch bf16 (cpu)", 10.0, 9.5, 10.5, today=True, precision="bf16"),
        _measured("openvino fp32 (cpu)", 25.0, 24.0, 26.0),
        _measured("openvino bf16 (cpu)", 20.0, 19.0, 21.0, precision="bf16"),
    ]
    d = choice.choose(probes, "FP16", today)
    note = d.plan.precision_note
    assert d.chosen == "openvino fp32 (cpu)" and "2.50x today's mapping (torch bf16 (cpu))" in note
    assert (
        "fp32 stands in for FP16: faster here (25 vs 20 samples/s, 1.25x the best FP16-class "
        "candidate, openvino bf16 (cpu))" in note
    )
    int8 = [
        _measured("ort int8", 30.0, 29.0, 31.0, today=True, precision="int8"),
        _measured("ov bf16", 45.0, 44.0, 46.0, precision="bf16"),
    ]
    d8 = choice.choose(int8, "FP8", PrecisionChoice(Placement("onnxruntime", "int8", "cpu"), "m"))
    assert (
        "bf16 stands in for FP8: faster here (45 vs 30 samples/s, 1.50x" in d8.plan.precision_note
    )


def test_a_stand_in_with_no_published_class_candidate_measured_says_why_not_that_it_was_faster():
    """On a CPU with no native 16-bit type a quick search measures no FP16-class candidate: the note
    names them and why, and never claims the fp32 choice was faster than them."""
    today = PrecisionChoice(Placement("onnxruntime", "fp32", "cpu"), "mapping")
    cands = row_candidates("torch", "cpu", flags={"avx512_vnni"}, cores=2)

    def note(failed: str = "") -> str:
        probes = _probes(cands, today)
        planning.plan_probes(probes, cands, "FP16", (), "quick")
        by = {p.label: p for p in probes}
        for label, thr in (("onnxruntime fp32 (cpu)", 2.0), ("openvino fp32 (cpu)", 3.0)):
            by[label].status, by[label].throughput, by[label].low, by[label].high = (
                "measured",
                thr,
                thr - 0.1,
                thr + 0.1,
            )
        if failed:
            by[failed].status = "failed"
        return choice.choose(probes, "FP16", today).plan.precision_note

    text = note()
    assert (
        "fp32 stands in for FP16: no FP16-class candidate was measured here (each is emulated on "
        "this hardware"
        in text
        and "faster here" not in text
    )
    assert (
        "search: onnxruntime fp16 (cpu), torch bf16 (cpu), torch bf16 compile (cpu), torch fp16 "
        "(cpu))" in text
    )
    assert (
        "(onnxruntime fp16 (cpu): not probed, torch bf16 (cpu): failed, torch bf16 compile (cpu): "
        "not probed, torch fp16 (cpu): not probed)"
    ) in note(failed="torch bf16 (cpu)")
    assert wording.unmeasured([]) == "none runs on this hardware"
    no_vnni = Probe(
        label="ort int8",
        placement=Placement.of("onnxruntime", "int8", "cpu", {}, threads=None),
        native=False,
        why="",
        status="not probed",
    )
    # int8 without VNNI is no fp32 emulation
    assert wording.unmeasured([no_vnni]) == "ort int8: not probed"


@pytest.mark.parametrize(
    "challenger_over_leader, rounds, wins, extend_s",
    [
        ([1.2, 1.18, 1.15, 1.21], 4, True, 25.0),  # settled after the first four rounds
        # resnet50 FP8's duel: settled, the leader stays
        ([0.918, 0.975, 0.79, 0.8907], 4, False, 25.0),
        # roformer's 3:1 for the leader: its interval still allows the challenger 1.1x; 4 more
        # rounds
        ([0.89, 0.81, 0.99, 1.02, 1.12, 1.10, 1.13, 1.11], 8, True, 25.0),
        (
            [0.89, 0.81, 0.99, 1.02, 0.9, 0.92, 0.88, 0.91],
            5,
            False,
            25.0,
        ),  # ... or one more settles it
        ([1.1, 0.9] * 6, 8, False, 25.0),  # never settled: stops at the cap, the median decides
        # out of time: no more rounds
        ([0.89, 0.81, 0.99, 1.02, 1.12, 1.10, 1.13, 1.11], 4, False, 0.0),
    ],
)
def test_an_undecided_duel_goes_on_up_to_the_cap(
    monkeypatch, challenger_over_leader, rounds, wins, extend_s
):
    """A duel goes on while its interval allows the side behind to be more than 5 % faster
    (roformer's duel at batch 1 went 3:1 for ONNX Runtime where OpenVINO ran 1.09x over 12 rounds
    measured again), up to 8 rounds and while it has taken under EXTEND_WITHIN_S; each side's round
    is one call at least."""
    monkeypatch.setattr(runoff, "EXTEND_WITHIN_S", extend_s)
    ratios = iter(challenger_over_leader)
    timings = []

    class Session:
        def run(self, inputs):
            return []

        def close(self):
            pass

    class Backend:
        def load(self, *args):
            return Session()

    monkeypatch.setattr(runoff, "require_backend", lambda name: Backend())
    pending = {}

    # the leader at 1.0, the challenger at its round's ratio
    def per_round(session, inputs, batch, cfg):
        key = len(timings) // 2
        timings.append(cfg)
        if key not in pending:
            pending[key] = next(ratios)
        first = (len(timings) - 1) % 2 == 0
        leader_first = key % 2 == 0
        is_leader = first == leader_first
        return type("M", (), {"throughput": 1.0 if is_leader else pending[key]})()

    monkeypatch.setattr(runoff, "time_session", per_round)
    ctx = _at_batch_1(row.SearchSettings("quick").measure_config())
    d = runoff.duel(ctx, _measured("leader", 1.0, 0.9, 1.1), _measured("challenger", 1.0, 0.9, 1.1))
    assert d.rounds == rounds and list(d.ratios) == pytest.approx(
        challenger_over_leader[:rounds], abs=1e-4
    )
    assert d.challenger_won == wins and (d.median > 1.0) == wins
    assert {cfg.min_count for cfg in timings} == {1} and d.seconds >= 0


def _pair_context(model) -> SearchContext:
    """The search at batch 1 of a runoff test's model (its inputs record their batch size)."""
    return SearchContext(
        model=model,
        inputs={"batch": 1},
        batch=1,
        window=row.SearchSettings("quick").measure_config(),
    )


class _PairModel:
    """A model for runoff tests: inputs record their batch size."""

    def make_inputs(self, batch, seed=0):
        return {"batch": batch}


PAIR_LABELS = {1: "ort fp32", 2: "ov fp32"}  # _pair's probes by their threads


def _pair_backends(monkeypatch, speeds):
    """Sessions whose throughput is speeds[(label, batch)]; returns the batches each load asked
    for."""
    loads = []

    class Session:
        def __init__(self, label, batch):
            self.label, self.batch = label, batch

        def run(self, inputs):
            return []

        def close(self):
            pass

    class Backend:
        def load(self, model, config, batch):
            loads.append(batch)
            return Session(PAIR_LABELS[config.threads], batch)

    monkeypatch.setattr(runoff, "require_backend", lambda name: Backend())
    calls = itertools.count()

    def timed(session, inputs, batch, cfg):  # a list of speeds: one per call, in turn
        speed = speeds[(session.label, batch)]
        speed = speed[next(calls) % len(speed)] if isinstance(speed, list) else speed
        return type(
            "M", (), {"throughput": speed * (1 if inputs["batch"] == batch else math.nan)}
        )()

    monkeypatch.setattr(runoff, "time_session", timed)
    return loads


def _pair(leader_thr=1.0, challenger_thr=0.99, load_s=1.0):
    pair = [
        _measured("ort fp32", leader_thr, leader_thr * 0.99, leader_thr * 1.01, today=True),
        _measured("ov fp32", challenger_thr, challenger_thr * 0.99, challenger_thr * 1.01),
    ]
    for p in pair:  # the threads tell the stand-in backend which of the two it loads
        threads = next(t for t, label in PAIR_LABELS.items() if label == p.label)
        p.placement, p.load_s = replace(p.placement, threads=threads), load_s
    return pair


@pytest.mark.parametrize(
    "b1_ratio, thr, settle_batch, settled, winner",
    [
        ([1.1, 0.95], 1.0, 12, True, "ov fp32"),  # a near tie at batch 1: batch 12 settles it
        # a near tie, but a round at batch 12 would take about 2,414 s
        (0.99, 0.01, 12, False, "ort fp32"),
        (1.2, 1.0, 4, False, "ov fp32"),  # no tie, and batch 4 is near: batch 1 decides
        (0.8, 1.0, 4, False, "ort fp32"),
        # batch 12 is 12x the search's: a duel within 30 % at batch 1 is settled there
        (1.2, 1.0, 12, True, "ov fp32"),
        (0.8, 1.0, 12, True, "ov fp32"),
        (1.6, 1.0, 12, False, "ov fp32"),  # ... but not one beyond it
        (0.6, 1.0, 12, False, "ort fp32"),
    ],
)
def test_a_near_tie_at_the_search_batch_is_settled_at_the_published_batch_where_it_fits(
    monkeypatch, b1_ratio, thr, settle_batch, settled, winner
):
    """Roformer's ONNX Runtime / OpenVINO pair is a near tie at batch 1 and OpenVINO 1.15-1.21x at
    batch 12: a near tie after the first rounds moves to the row's largest published batch when one
    round there is predicted to fit SETTLE_WITHIN_S; its rounds decide and its ratio is the
    decision's."""
    loads = _pair_backends(
        monkeypatch,
        {
            ("ort fp32", 1): 1.0,
            ("ov fp32", 1): b1_ratio,
            ("ort fp32", 12): 1.0,
            ("ov fp32", 12): 1.2,
        },
    )
    probes = _pair(1.0 * thr, 0.99 * thr)
    verdict = runoff.run(
        _pair_context(_PairModel()),
        probes,
        within=runoff.window(contended=False),
        settle_batch=settle_batch,
    )
    assert verdict.winner == winner
    assert (loads[-2:] == [12, 12]) == settled and any(
        d.batch == 12 for d in verdict.duels
    ) == settled
    if settled:
        tie, at12 = verdict.duels
        # no extra rounds at batch 1: batch 12 settles it
        assert tie.rounds == runoff.RUNOFF_ROUNDS
        assert at12.median == pytest.approx(1.2) and 1 <= at12.rounds <= runoff.RUNOFF_ROUNDS
        d = choice.choose(
            probes,
            "FP16",
            PrecisionChoice(Placement("onnxruntime", "fp32", "cpu"), "mapping"),
            verdict,
        )
        assert d.ratio_vs_today == pytest.approx(1.2) and d.ratio_batch == 12
        assert (
            "1.20x today's mapping (ort fp32) at batch 12, where a close duel"
            in d.plan.precision_note
        )
        assert (
            "side by side with ort fp32 at batch 12, settling a close duel: 1.20x"
            in d.probes[1].reason
        )
        one = dataclasses.replace(verdict, duels=(tie, dataclasses.replace(at12, ratios=(1.2,))))
        assert "settling a close duel: 1.20x (one round)" in wording.runoff_text(one, probes[1])
    elif thr < 0.1:
        assert (
            "not settled at batch 12: one round there predicted at 2414 s, over 45 s, nor at a "
            "batch 8x the search's" in verdict.unsettled[0].text
        )
        d = choice.choose(
            probes,
            "FP16",
            PrecisionChoice(Placement("onnxruntime", "fp32", "cpu"), "mapping"),
            verdict,
        )
        assert "a close duel at batch 1, not settled at batch 12" in d.probes[0].reason
    else:
        assert not verdict.unsettled and "settle" not in verdict.to_dict()


@pytest.mark.parametrize("settle_batch, dueled", [(40, True), (4, False), (None, False)])
def test_far_below_the_published_batch_the_probes_settle_no_challenger(
    monkeypatch, settle_batch, dueled
):
    """Albert FP16's probes at batch 1 put OpenVINO at 1.49/s [1.484, 1.497] and ONNX Runtime at
    1.92/s [1.877, 1.968]: on a quiet machine the intervals settled it, and at batch 40 OpenVINO ran
    1.06x. Where the published batch is 8x the search's or more, every challenger in the window is
    dueled, and a duel within 30 % is settled there."""
    loads = _pair_backends(
        monkeypatch,
        {("ort fp32", 1): 19.2, ("ov fp32", 1): 14.9, ("ort fp32", 40): 1.0, ("ov fp32", 40): 1.06},
    )
    probes = _pair(19.2, 14.9, load_s=0.1)  # 10x albert's rates: a round at batch 40 fits 45 s
    verdict = runoff.run(
        _pair_context(_PairModel()),
        probes,
        within=runoff.window(contended=False),
        settle_batch=settle_batch,
    )
    if not dueled:
        assert verdict is None and loads == []
        return
    tie, at40 = verdict.duels
    assert tie.median == pytest.approx(14.9 / 19.2) and at40.batch == 40
    assert verdict.winner == "ov fp32" and loads[-2:] == [40, 40]


def test_a_close_duel_too_slow_to_settle_at_the_published_batch_settles_at_the_largest_that_fits(
    monkeypatch,
):
    """Bert FP16 on a 2-core EPYC: ONNX Runtime won the batch-1 duel 1.27x, a round at batch 40 was
    predicted at 61 s, so batch 1 decided and the row ran 0.87x OpenVINO in `make bench-peers`;
    OpenVINO was ahead from batch 16 up. The duel is settled at the largest batch where two rounds
    fit (13 at these probes' rates and loads), and its rounds there decide."""
    loads = _pair_backends(
        monkeypatch,
        {
            ("ort fp32", 1): 1.0,
            ("ov fp32", 1): 0.79,
            ("ort fp32", 13): 1.0,
            ("ov fp32", 13): 1.1,
        },
    )
    probes = _pair(1.31, 1.44, load_s=1.5)
    verdict = runoff.run(
        _pair_context(_PairModel()),
        probes,
        within=runoff.window(contended=False),
        settle_batch=40,
    )
    assert [d.batch for d in verdict.duels] == [None, 13] and loads[-2:] == [13, 13]
    assert verdict.winner == "ov fp32" and not verdict.unsettled and verdict.duels[1].rounds >= 2
    assert verdict.duels[1].ratio_of("ov fp32") == pytest.approx(1.1)


@pytest.mark.parametrize("within_s, rounds", [(45.0, 4), (0.0, 1)])
def test_a_settle_runs_its_rounds_while_the_next_one_fits_its_time(monkeypatch, within_s, rounds):
    """At least one round; more while undecided and while the next is predicted to end in time."""
    _pair_backends(monkeypatch, {("ort fp32", 12): 1.0, ("ov fp32", 12): [1.3, 0.9]})
    monkeypatch.setattr(runoff, "SETTLE_WITHIN_S", within_s)
    d = runoff.settle(_PairModel(), *_pair(), 12)
    assert d.rounds == rounds and d.batch == 12


def test_a_settle_that_fails_leaves_the_search_batchs_verdict_with_the_reason(monkeypatch):
    class TooBig(_PairModel):
        def make_inputs(self, batch, seed=0):
            if batch > 1:
                raise MemoryError(f"batch {batch}")
            return super().make_inputs(batch, seed)

    _pair_backends(monkeypatch, {("ort fp32", 1): 1.0, ("ov fp32", 1): [1.1, 0.97]})
    verdict = runoff.run(
        _pair_context(TooBig()), _pair(), within=runoff.window(contended=False), settle_batch=12
    )
    tie, failed = verdict.duels
    assert verdict.winner == "ov fp32" and tie.median == pytest.approx(1.035)
    assert failed.failed and failed.to_dict() == {
        "leader": "ort fp32",
        "challenger": "ov fp32",
        "batch": 12,
        "error": "MemoryError: batch 12",
    }


def test_the_runoff_duels_today_first_then_the_close_ones_and_its_winner_is_chosen():
    today = PrecisionChoice(Placement("torch", "bf16", "cpu"), "mapping")

    def probes():
        return [
            _measured("torch bf16", 8.7, 8.0, 9.4, today=True, precision="bf16"),
            _measured("ov bf16", 2.9, 2.7, 3.1, precision="bf16"),
            _measured("torch fp32", 3.7, 3.5, 3.9),
            _measured("ort fp32", 1.5, 1.4, 1.6),
        ]

    leader, rivals = runoff.challengers(probes())
    # ort fp32: below 0.2x
    assert leader.label == "torch bf16" and [p.label for p in rivals] == ["torch fp32", "ov bf16"]
    ps = probes()
    verdict = Runoff.from_dict(
        {
            "winner": "ov bf16",
            "duels": [
                {
                    "leader": "torch bf16",
                    "challenger": "torch fp32",
                    "ratios": [0.5, 0.6, 0.55, 0.5],
                    "median": 0.525,
                },
                {
                    "leader": "torch bf16",
                    "challenger": "ov bf16",
                    "ratios": [1.6, 1.8, 1.7, 1.5],
                    "median": 1.65,
                },
            ],
        }
    )
    d = choice.choose(ps, "FP16", today, verdict)
    # the duel's, not the probes'
    assert d.chosen == "ov bf16" and d.ratio_vs_today == pytest.approx(1.65)
    assert d.ratio_interval == [1.5, 1.8]
    by = {p.label: p for p in ps}
    assert "side by side with torch bf16: 1.65x" in by["ov bf16"].reason
    assert (
        "side by side with ov bf16: 0.61x" in by["torch bf16"].reason
        and by["torch bf16"].status == "lost"
    )
    assert "1.65x today's mapping" in d.plan.precision_note
    today_first = probes()
    today_first[0].throughput, today_first[1].throughput, today_first[2].throughput = 3.0, 5.0, 9.0
    assert [p.label for p in runoff.challengers(today_first)[1]] == ["torch bf16", "ov bf16"]
    assert runoff.challengers([_measured("one", 1.0, 0.9, 1.1)])[1] == []
    # on a quiet machine only a candidate within the early stop's 0.7x of the leader is dueled
    assert [p.label for p in runoff.challengers(probes(), runoff.window(contended=False))[1]] == []
    close = probes()
    # torch fp32 at 0.70x the leader, its interval reaching the leader's
    close[2].throughput, close[2].high = 6.1, 8.2
    assert [p.label for p in runoff.challengers(close, runoff.window(contended=False))[1]] == [
        "torch fp32"
    ]
    # wholly below the leader's interval (8.0-9.4): settled by the probes on a quiet machine
    close[2].high = 7.9
    assert runoff.challengers(close, runoff.window(contended=False))[1] == []
    # contended: dueled
    assert [p.label for p in runoff.challengers(close)[1]] == ["torch fp32", "ov bf16"]


def test_an_fp8_row_on_a_cuda_host_with_tensorrt_searches_tensorrt_int8_as_todays_mapping(
    small, monkeypatch
):
    """Issue 30: the search offers what a session really starts here (TensorRT), so the FP8 row's
    TensorRT int8 is a candidate and today's mapping, not barred for want of providers."""
    seen = []
    monkeypatch.setattr(
        onnxruntime_probe, "usable_gpu_providers", lambda: ["TensorrtExecutionProvider"]
    )
    monkeypatch.setattr(
        row,
        "measure_all",
        lambda ctx, probes, *a, **k: seen.extend(
            (p.label, p.placement.device, p.status, p.today) for p in probes
        ),
    )
    monkeypatch.setattr(runoff, "run", lambda *a, **k: None)
    decision = row.search_row(small, "FP8", 1, "cuda", TINY)
    by = {label: (status, today) for label, _, status, today in seen}
    assert by["onnxruntime int8 (tensorrt)"] == ("pending", True)
    assert by["onnxruntime fp16 (tensorrt)"] == ("pending", False)
    assert (
        decision.today == "onnxruntime int8 (tensorrt)"
        and decision.plan.placement.device == "tensorrt"
    )
    # no TensorRT: CUDA fp16 instead
    monkeypatch.setattr(onnxruntime_probe, "usable_gpu_providers", lambda: [])
    seen.clear()
    assert row.search_row(small, "FP8", 1, "cuda", TINY).today != "onnxruntime int8 (tensorrt)"
    assert not any(device == "tensorrt" for _, device, _, _ in seen)


def test_a_search_that_measured_nothing_never_replaces_the_jobs_plan(
    outputs, fake_backend, small, monkeypatch
):
    """Issue 30: the fallback plan of a search that measured no candidate (today's mapping, worked
    out without the job's knowledge) never overrides the plan the job was given; the note says
    so."""
    from kit.studies import model_benchmark

    monkeypatch.setattr(model_benchmark, "load_model", lambda *a, **k: small)
    fallback = {
        "chosen": None,
        "today": None,
        "fallback": True,
        "depth": "quick",
        "probes": [],
        "plan": {
            "backend": "onnxruntime",
            "precision": "fp16",
            "device": "cuda",
            "options": {},
            "threads": None,
            "precision_note": "no candidate",
        },
    }
    monkeypatch.setattr(
        model_benchmark, "decide", lambda *a, **k: (Decision.from_dict(fallback), False)
    )
    result = model_benchmark.run(
        dict(
            model=small.name,
            small=True,
            backend="fake",
            precision="int8",
            batch_sizes=[1],
            search=True,
            check_numerics=False,
            accuracy=False,
            roofline=False,
            warmup=0,
            min_duration_s=0.01,
            min_count=2,
        )
    )
    assert result.status == "ok", result.errors
    assert result.backend.name == "fake" and result.backend.precision == "int8"
    assert any("job's own plan (fake int8" in n for n in result.notes)


@pytest.mark.parametrize(
    "noisy, window", [(True, runoff.RUNOFF_WITHIN), (False, runoff.QUIET_WITHIN)]
)
def test_the_runoffs_window_follows_what_an_idle_moment_finds(small, monkeypatch, noisy, window):
    """Other processes' load or steal at the search's start (kit.measure.noise) widens the
    runoff."""
    seen = {}
    monkeypatch.setattr(
        row,
        "idle_sample",
        lambda: Noise(
            noisy=noisy, reasons=("other load",) if noisy else (), other_load=0.5 if noisy else 0.0
        ),
    )
    monkeypatch.setattr(row, "measure_all", lambda *a, **k: None)
    monkeypatch.setattr(runoff, "run", lambda *a, within, **k: seen.setdefault("within", within))
    decision = row.search_row(
        small, "FP16", 1, "cpu", TINY, candidates=[RowCandidate.of("onnxruntime", "fp32")]
    )
    assert seen["within"] == window and decision.machine_at_start.noisy is noisy
    assert decision.machine_at_start.other_load == (0.5 if noisy else 0.0)
    written = replace(decision, runoff=None).to_dict()["machine_at_start"]  # runoff faked above
    assert written["noisy"] is noisy and written["reasons"] == (["other load"] if noisy else [])


def test_an_idle_sample_reports_other_load_and_steal():
    from kit.measure.noise import idle_sample

    s = idle_sample(0.2)
    assert set(s.to_dict()) >= {"noisy", "reasons", "cpus"} and isinstance(s.noisy, bool)
    assert s.noisy == bool(s.reasons) and (s.steal_share is None) == ("stat_reason" in s.more)


def test_a_decision_file_an_older_kit_wrote_still_loads_and_round_trips(outputs, monkeypatch):
    """The cache's JSON format is kept: a file written as a dict before the decision was typed (a
    fallback without `ratio_batch`, probes as dicts) loads as a Decision, and writing it back keeps
    every field it had."""
    import json

    monkeypatch.setenv("KIT_CACHE", str(outputs / "cache"))
    key = cache.decision_key("bert-torch-fp32", "FP16", 1, "cpu")
    probe = _measured("ort fp32", 2.0, 1.9, 2.1, today=True).to_dict()
    old = {
        "chosen": "ort fp32",
        "today": "ort fp32",
        "fallback": True,
        "plan": {
            "backend": "onnxruntime",
            "precision": "fp32",
            "device": "cpu",
            "options": {},
            "threads": None,
            "precision_note": "kept",
        },
        "ratio_vs_today": None,
        "ratio_interval": [None, None],
        "separated": False,
        "probes": [probe],
        "runoff": None,
        "depth": "quick",
        "searched_s": 1.5,
        "machine_at_start": {
            "noisy": True,
            "reasons": ["CPU steal 11% > 5%"],
            "other_load": 0.02,
            "steal_share": 0.11,
        },
        "contended": False,
        "key": key,
        "cache_file": "x.json",
    }
    cache.decision_path(key).parent.mkdir(parents=True, exist_ok=True)
    cache.decision_path(key).write_text(json.dumps(old))
    loaded = cache.load_decision(key, "quick", load_now=0.0)
    assert (
        loaded.fallback
        and loaded.plan.precision_note == "kept"
        and loaded.probes[0].throughput == 2.0
        and loaded.machine_at_start.noisy
        and loaded.machine_at_start.steal_share == 0.11
    )
    assert loaded.to_dict().items() >= old.items() and loaded.to_dict()["ratio_batch"] is None
    assert Decision.from_dict(loaded.to_dict()) == loaded


def test_a_probe_an_older_kit_wrote_without_compile_s_reads_back_as_none(outputs, monkeypatch):
    import json

    monkeypatch.setenv("KIT_CACHE", str(outputs / "cache"))
    key = cache.decision_key("bert-torch-fp32", "FP16", 1, "cpu")
    probe = {
        k: v
        for k, v in _measured("torch fp16 compile", 2.0, 1.9, 2.1).to_dict().items()
        if k != "compile_s"
    }
    cache.decision_path(key).parent.mkdir(parents=True, exist_ok=True)
    cache.decision_path(key).write_text(
        json.dumps({"chosen": None, "plan": SOME_PLAN, "probes": [probe], "key": key})
    )
    loaded = cache.load_decision(key, "quick", load_now=0.0)
    assert loaded.probes[0].compile_s is None and loaded.probes[0].throughput == 2.0
    assert loaded.to_dict()["probes"][0]["compile_s"] is None  # written back with the field


# ------------------------------------------------------------ a GPU decides at each published batch


def test_a_gpus_torch_eager_candidates_are_measured_only_where_a_cuda_graph_fails(monkeypatch):
    from kit.search import candidates

    monkeypatch.setattr(candidates, "tensorrt_python", lambda: False)
    cands = [c for c in row_candidates("torch", "cuda") if c.placement.backend == "torch"]
    graph16, graph_bf16 = "torch fp16 cuda-graph (cuda)", "torch bf16 cuda-graph (cuda)"
    stand_ins = {
        "torch fp32 (cuda)": graph16,
        "torch fp16 (cuda)": graph16,
        "torch bf16 (cuda)": graph16,
        graph_bf16: graph16,
    }
    assert {c.label: c.fallback_for for c in cands if c.fallback_for} == stand_ins
    probes, _ = planning.row_probes(
        cands, PrecisionChoice(Placement("onnxruntime", "fp16", "cuda"), "m"), "FP16", "quick"
    )
    by = {p.label: p for p in probes}
    assert {label for label, p in by.items() if p.status == "fallback"} == set(stand_ins)
    # the fp16 graph passes: none of its stand-ins is measured
    by[graph16].status = "measured"
    assert not any(measuring.settle_fallback(by[label], probes) for label in stand_ins)
    # a model a capture refuses in fp16, or whose fp16 overflows: all of them are
    for label in stand_ins:
        by[label].status = "fallback"
    by[graph16].status = "failed"
    assert all(measuring.settle_fallback(by[label], probes) for label in stand_ins)
    today = planning.row_probes(
        cands, PrecisionChoice(Placement("torch", "fp16", "cuda"), "m"), "FP16", "quick"
    )[0]
    # today's: always measured
    assert next(p for p in today if p.label == "torch fp16 (cuda)").status == "pending"


def test_a_gpus_onnxruntime_eager_candidates_are_measured_only_where_its_cuda_graph_fails():
    ort = [
        c
        for c in row_candidates("torch", "cuda", providers=["CUDAExecutionProvider"])
        if c.placement.backend == "onnxruntime" and c.placement.device == "cuda"
    ]
    graph = "onnxruntime fp16 cuda-graph (cuda)"
    assert {c.label: c.fallback_for for c in ort if c.fallback_for} == {
        "onnxruntime fp32 (cuda)": graph,
        "onnxruntime fp16 (cuda)": graph,
    }
    today = PrecisionChoice(Placement("onnxruntime", "fp16", "cuda"), "m")
    by = {p.label: p for p in planning.row_probes(ort, today, "FP16", "quick")[0]}
    # today's mapping is measured all the same (the yardstick), the fp32 one only as a fallback
    assert by["onnxruntime fp16 (cuda)"].status == "pending"
    assert by["onnxruntime fp32 (cuda)"].status == "fallback"
    assert by[graph].status == "pending"


def test_a_gpu_job_carries_one_decision_key_per_published_batch_a_cpu_job_one():
    from kit.batch.profiles import jobs_for, search_key

    def resnet(kind):
        return next(
            j for j in jobs_for("quick", kind) if j.name == "resnet50-torch-fp32_FP16"
        ).parameters

    gpu, cpu = resnet("cuda"), resnet("cpu")
    assert gpu["search_key"] == ",".join(
        search_key("resnet50-torch-fp32", "FP16", b, "cuda") for b in gpu["batch_sizes"]
    )
    assert len(gpu["batch_sizes"]) > 1 and "search_batch" not in gpu
    assert cpu["search_key"] == search_key(
        "resnet50-torch-fp32", "FP16", cpu["search_batch"], "cpu"
    )


def test_a_gpu_run_searches_each_batch_smallest_first_and_runs_each_at_its_own_plan(
    outputs, fake_backend, small, monkeypatch
):
    """Issue 43 item 3: on a GPU a call is milliseconds, so each published batch gets its own
    decision; the larger batch's search knows the smaller one's (its failures are not probed again),
    and each figure names the plan it ran and the batch that plan was decided at."""
    from kit.studies import model_benchmark

    asked = []

    def decide(model, published, batch, kind, settings, *, prior=None, **k):
        asked.append((batch, kind, prior and prior.batch_size, settings.settle_batch))
        precision = {1: "fp32", 2: "fp16"}[batch]
        plan = Plan(Placement("fake", precision, "cuda"), precision_note=f"searched at {batch}")
        return Decision(
            chosen=f"fake {precision} (cuda)",
            today="fake fp16 (cuda)",
            plan=plan,
            batch_size=batch,
            key=cache.decision_key(small.name, published, batch, kind, small=True),
        ), False

    monkeypatch.setattr(model_benchmark, "load_model", lambda *a, **k: small)
    monkeypatch.setattr(model_benchmark, "decide", decide)
    keys = ",".join(
        cache.key_hash(cache.decision_key(small.name, "FP16", b, "cuda", small=True))
        for b in (2, 1)
    )
    result = model_benchmark.run(
        dict(
            model=small.name,
            small=True,
            backend="fake",
            device="cuda",
            hardware="cuda",
            batch_sizes=[2, 1],
            search=True,
            search_key=keys,
            check_numerics=False,
            accuracy=False,
            roofline=False,
            power=False,
            warmup=0,
            min_duration_s=0.01,
            min_count=2,
        )
    )
    assert result.status == "ok", result.errors
    assert asked == [(1, "cuda", None, None), (2, "cuda", 1, None)]
    by_batch = {m.batch_size: m.searched_plan for m in result.measurements}
    assert by_batch[1]["precision"] == "fp32" and by_batch[1]["decided_at_batch"] == 1
    assert by_batch[2]["precision"] == "fp16" and by_batch[2]["decided_at_batch"] == 2
    # each batch's scorecard row names the plan that ran it, not the headline's
    from kit.publish.scorecard import measured_hardware

    assert "; fake fp32" in measured_hardware(result, 1), measured_hardware(result, 1)
    assert "; fake fp16" in measured_hardware(result, 2)
    assert [s["batch_size"] for s in result.tables.to_dict()["search_by_batch"]] == [1, 2]
    assert (
        result.backend.precision == "fp16"
        and "Precision at batch 1: searched at 1." in result.notes
    )
    # each decision matched its own key
    assert not any("is not the batch's" in n for n in result.notes)


def test_what_failed_numerics_before_is_skipped_and_todays_mapping_is_always_measured():
    """kit.search.planning.skip_failed_before: a graph's numerics do not depend on the batch, so a
    candidate that failed the numerics gate at the smaller batch is not probed again; today's
    mapping is measured at every batch, even where it failed before."""

    def probe(label, status="pending", reason="", today=False):
        return Probe(
            label=label,
            placement=Placement.of("torch", "fp16", "cuda", {}, threads=None),
            native=True,
            why="",
            today=today,
            status=status,
            reason=reason,
        )

    prior = Decision(
        chosen="b",
        today="t",
        plan=Plan(Placement("torch", "fp16", "cuda")),
        batch_size=1,
        probes=[
            probe("a", "failed numerics", "max_abs 3.1 over the bound"),
            probe("t", "failed", "out of memory", today=True),
            probe("b", "chosen"),
        ],
    )
    probes = [probe("a"), probe("t", today=True), probe("b")]
    planning.skip_failed_before(probes, prior)
    assert (
        probes[0].status == "not probed"
        and probes[0].reason == "failed numerics at batch 1: max_abs 3.1 over the bound"
    )
    assert probes[1].status == "pending" and probes[2].status == "pending"


def test_a_candidate_that_failed_at_the_smaller_batch_is_not_probed_at_the_next(
    searchable, fake_backend
):
    cands = [
        RowCandidate.of("onnxruntime", "fp32"),
        RowCandidate.of("fake", "fp16", native=False),
    ]  # fake: wrong shape
    first, _ = row.decide(searchable, "FP16", 1, "cpu", TINY_FULL, candidates=cands)
    assert {p.label: p for p in first.probes}["fake fp16 (cpu)"].status == "failed"
    second, _ = row.decide(searchable, "FP16", 2, "cpu", TINY_FULL, candidates=cands, prior=first)
    fake = {p.label: p for p in second.probes}["fake fp16 (cpu)"]
    assert (
        fake.status == "not probed"
        and fake.reason.startswith("failed at batch 1: ")
        and fake.calls == 0
    )
    assert {p.label: p for p in second.probes}["onnxruntime fp32 (cpu)"].status == "chosen"
    # no prior: measured
    third, _ = row.decide(searchable, "FP16", 4, "cpu", TINY_FULL, candidates=cands)
    assert {p.label: p for p in third.probes}["fake fp16 (cpu)"].status == "failed"


def test_a_runoff_an_older_kit_wrote_reads_as_records_and_writes_back_as_it_was():
    """A decision file's runoff (duels, a failed settle, a close duel left unsettled) reads as the
    typed verdict and writes back key for key; the chosen probe's reason and ratio come from it."""
    written = {
        "winner": "ov fp32",
        "duels": [
            {
                "leader": "ort fp32",
                "challenger": "ov fp32",
                "ratios": [1.1, 0.97, 1.05, 1.02],
                "median": 1.035,
                "seconds": 3.2,
            },
            {"leader": "ort fp32", "challenger": "ov fp32", "batch": 12, "error": "MemoryError"},
        ],
        "within": 0.7,
        "settle": [{"pair": ["ort fp32", "ov fp32"], "text": "a close duel at batch 1, not"}],
    }
    verdict = Runoff.from_dict(written)
    assert verdict.to_dict() == written and verdict.duels[1].failed
    assert verdict.duels[0].ratio_of("ort fp32") == pytest.approx(1 / 1.035)
    probes = _pair()
    today = PrecisionChoice(Placement("onnxruntime", "fp32", "cpu"), "mapping")
    decision = choice.choose(probes, "FP16", today, verdict)
    assert decision.chosen == "ov fp32" and decision.ratio_vs_today == pytest.approx(1.035)
    assert decision.ratio_interval == [0.97, 1.1] and decision.ratio_batch is None
    assert "runoff with ort fp32 failed: MemoryError" in probes[1].reason
    assert "a close duel at batch 1, not" in probes[0].reason
    decision = replace(decision, runoff=verdict)  # as search_row records it
    assert decision.summary()["runoff"] == written
    assert Decision.from_dict(decision.to_dict()).runoff == verdict
