"""kit.precision: the published and run precision enums, their one mapping, and their parsing."""

import json

import pytest

from kit.errors import UnknownNameError, UnknownValueError
from kit.precision import PublishedPrecision, RunPrecision, report_spelling
from kit.publish.comparability import PublishedRun
from kit.search import cache
from kit.search.gate import bits, row_bits
from kit.search.precision_map import map_precision


def test_each_published_precision_runs_on_the_ipu_at_its_own_type():
    assert {p.value: p.as_run.value for p in PublishedPrecision} == {
        "FP32": "fp32",
        "FP16": "fp16",
        "FP8": "fp8",
    }
    for published in PublishedPrecision:
        assert map_precision(published, "ipu").placement.precision is published.as_run
        assert published.bits == published.as_run.bits


def test_bits_of_each_precision():
    assert {p.value: bits(p) for p in RunPrecision} == {
        "fp32": 32,
        "bf16": 16,
        "fp16": 16,
        "int8": 8,
        "fp8": 8,
    }
    assert {p.value: row_bits(p) for p in PublishedPrecision} == {"FP32": 32, "FP16": 16, "FP8": 8}


def test_members_are_the_strings_files_hold():
    assert (
        json.dumps({"published": PublishedPrecision.FP16, "precision": RunPrecision.BF16})
        == '{"published": "FP16", "precision": "bf16"}'
    )
    assert PublishedPrecision.FP8 == "FP8" and RunPrecision.INT8 == "int8"
    assert f"{PublishedPrecision.FP16} -> {RunPrecision.BF16}" == "FP16 -> bf16"


def test_a_published_precision_reads_in_either_case_a_run_one_only_as_written():
    assert PublishedPrecision.parse("fp16") is PublishedPrecision.FP16
    assert PublishedPrecision.parse("FP8") is PublishedPrecision.FP8
    assert RunPrecision.parse("bf16") is RunPrecision.BF16
    with pytest.raises(
        UnknownValueError, match="unknown run precision 'FP16'; known: bf16, fp16, fp32, fp8, int8"
    ):
        RunPrecision.parse("FP16")


@pytest.mark.parametrize(
    "parse, bad",
    [
        (PublishedPrecision.parse, "INT4"),
        (RunPrecision.parse, "fp4"),
        (bits, "fp4"),
        (row_bits, "FP4"),
    ],
)
def test_a_bad_precision_is_named_with_the_allowed_ones(parse, bad):
    with pytest.raises(UnknownValueError) as caught:
        parse(bad)
    assert caught.value.name == bad
    assert caught.value.known and all(k in str(caught.value) for k in caught.value.known)
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, UnknownNameError)


def test_comparability_compares_a_run_with_the_published_row_in_run_terms():
    run = PublishedRun.of("resnet50-torch-fp32", "FP16", 32)
    assert run.precision is RunPrecision.FP16


def test_report_spelling_is_upper_case_and_keeps_what_the_kit_does_not_run():
    assert RunPrecision.BF16.report_name == "BF16"
    assert report_spelling(" int8/bf16") == "INT8/BF16"


def test_the_search_cache_key_holds_the_published_string_as_before():
    key = cache.decision_key("resnet50-torch-fp32", "fp16", 32, "cpu")
    assert key["published"] is PublishedPrecision.FP16
    as_before = {**key, "published": "FP16"}
    assert json.dumps(key, sort_keys=True) == json.dumps(as_before, sort_keys=True)
    assert cache.key_hash(key) == cache.key_hash(as_before)
