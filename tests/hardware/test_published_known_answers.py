"""Known answers for the readers of the published figures (issue 33): each value below is copied by
hand from the seeds (seed 001's README table and ByteMLPerf's report JSONs, seed 003's C2 tables),
so a reader that takes the wrong column, row or batch fails here."""

from __future__ import annotations

import pandas as pd
import pytest

from kit.errors import UnknownNameError
from kit.published import figures as published


def headline(model: str, precision: str, study: str = "bytemlperf_c600") -> pd.Series:
    rows = published.headline_rows(study)
    return rows[(rows.model == model) & (rows.precision == precision)].iloc[0]


def test_a_headline_row_keeps_qps_and_metric_apart():
    r = headline("resnet50-torch-fp32", "FP16")
    assert r.qps == 13499.0 and r.metric == "Top-1" and r.metric_value == 0.76963
    assert r.metric_unit == "fraction (0-1)" and r.dataset == "Open Imagenet"
    albert = headline("albert-torch-fp32", "FP16")
    assert albert.qps == 3280.0 and albert.metric == "F1 Score" and albert.metric_value == 87.69675


def test_the_older_table_is_its_own():
    r = headline("albert-torch-fp32", "FP16", "bytemlperf_c600_older")
    assert r.qps == 2938.0 and r.metric_value == 86.43530
    assert (
        len(published.headline_rows()) == 14
        and len(published.headline_rows("bytemlperf_c600_older")) == 6
    )
    with pytest.raises(UnknownNameError):
        published.headline_rows("c2_qwant")


def test_the_headline_batch_is_the_report_batch_nearest_its_qps():
    # 13,542 at 32, 7,062 at 4
    assert published.headline_batch("resnet50-torch-fp32", "FP16", 13499.0) == 32
    assert published.headline_batch("resnet50-torch-fp32", "FP16", 7000.0) == 4
    assert published.headline_batch("clip-onnx-fp32", "FP16", 7305.0) == 40


def test_the_published_run_settings_of_a_row():
    s = published.ipu_run_settings("resnet50-torch-fp32", "FP16")
    assert s["batch_sizes"] == [4, 32] and s["clients"] == 4
    assert s["per_batch"] == [
        {
            "batch": 4,
            "Performance/AVG Latency": 2.24,
            "Performance/P99 Latency": 2.53,
            "Performance/QPS": 7062.0,
        },
        {
            "batch": 32,
            "Performance/AVG Latency": 9.33,
            "Performance/P99 Latency": 10.96,
            "Performance/QPS": 13542.0,
        },
    ]
    assert published.ipu_run_settings("clip-onnx-fp32", "FP16")["clients"] == 3


def test_poprt_versions():
    assert published.poprt_version("resnet50-torch-fp32", "FP16") == "1.4.0"
    assert published.poprt_version("clip-onnx-fp32", "FP16") == "1.3.0"
    assert published.poprt_version("no-such-model", "FP16") == "not stated"


def test_the_c2_tables_and_setup():
    t = published.c2_tables()
    assert (
        list(t.columns) == ["Latency", "Throughput", "Energy efficiency"]
        and t.index.name == "Batch size"
    )
    assert t.loc[6].tolist() == [2.82, 2131.01, 7.87] and t.loc[8].tolist() == [3.32, 2409.79, 9.07]
    assert published.c2_latency_ms() == {2: 1.36, 4: 1.94, 6: 2.82, 8: 3.32, 10: 4.13, 12: 4.75}
    assert published.c2_ipus() == 2 and published.c2_setup_value("Card power") == 300.0
    with pytest.raises(UnknownNameError) as error:
        published.c2_setup_value("Card colour")
    assert str(error.value) == (
        "unknown C2 setup figure 'Card colour'; known: Best energy efficiency, Card power, "
        "Highest throughput, IPU cores, IPUs used, Images, Lowest latency, Memory bandwidth, "
        "Micro batch per IPU, Parameters, Power sensor, SDK version, SRAM per IPU, "
        "Weights size fp32"
    )


def test_the_part_of_each_study():
    assert (
        published.study_part("bytemlperf_c600") == "c600"
        and published.study_part("c2_qwant") == "gc2"
    )
    assert published.study_part("bytemlperf_c600_older") == "c600"
    assert (
        published.study_hardware("c2_qwant")
        == "Graphcore C2 card (2 x GC2 Mk1 IPU), PopART SDK 1.0.136"
    )
    with pytest.raises(UnknownNameError):
        published.study_hardware("no-such-study")


def test_report_figures_are_numbers_with_their_batch():
    r = published.reports()
    row = r[
        (r.model == "resnet50-torch-fp32")
        & (r.precision == "FP16")
        & (r.metric == "Performance/QPS")
        & (r.batch == 32)
    ]
    assert row.number.tolist() == [13542.0] and str(r.batch.dtype) == "Int64"
    f = published.figures()
    assert f[f.figure_id == "bytemlperf_c600:000"].number.tolist() == [3280.0]


@pytest.mark.parametrize(
    "text, part",
    [
        ("Graphcore C600 PCIe card", "c600"),
        ("IPU21 Mk2", None),
        ("ipu21 (C600)", "c600"),
        ("a ipu21 board", "c600"),
        ("Graphcore GC2", "gc2"),
        ("the C2 card", "gc2"),
        ("Bow-2000", "bow"),
        ("IPU-M2000", "m2000"),
        ("NVIDIA A100", None),
        ("c600", None),
    ],
)
def test_the_part_a_hardware_description_names(text, part):
    assert published.part_named_in(text) == part


def test_each_study_names_its_part():
    assert published.study_part("bytemlperf_c600") == "c600"
    assert published.study_part("c2_qwant") == "gc2"
    assert (
        published.study_hardware("system_facts")
        == published.figures().query("study == 'system_facts'")["hardware"].iloc[0]
    )


def test_unknown_names_are_errors_that_name_them():
    with pytest.raises(UnknownNameError, match="^unknown published study 'nope'; known: "):
        published.study_hardware("nope")
    with pytest.raises(UnknownNameError, match="^unknown seed table 'nope'; known: "):
        published.headline_rows("nope")


def test_a_row_whose_spec_names_no_clients_runs_one():
    """bert-torch-fp32's ByteMLPerf spec leaves ipu_clients blank: one client."""
    assert (
        published.model_specs()
        .query("model == 'bert-torch-fp32'")["ipu_clients"]
        .str.strip()
        .eq("")
        .all()
    )
    assert published.ipu_run_settings("bert-torch-fp32", "FP16")["clients"] == 1
    assert published.ipu_run_settings("clip-onnx-fp32", "FP16")["clients"] == 3
