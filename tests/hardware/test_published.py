import re

import pandas as pd
import pytest

from kit.published import figures as published
from tests.conftest import shared_or_skip


def seed_text(seed_id: str) -> str:
    folder = shared_or_skip("seeds")
    return next(folder.glob(f"{seed_id}_*.txt")).read_text()


def test_every_figure_is_printed_verbatim_in_its_seed():
    figures = published.figures()
    assert len(figures) >= 80
    for row in figures.itertuples():
        seed_id = row.source[5:8]
        assert row.printed in seed_text(seed_id), (row.figure_id, row.printed)


def seed_section(text: str, heading: str) -> str:
    """The seed's text under the markdown heading `heading`, up to the next heading of its level or
    above."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip("#").strip() == heading)
    level = len(lines[start]) - len(lines[start].lstrip("#"))
    end = next(
        (
            i
            for i in range(start + 1, len(lines))
            if lines[i].startswith("#") and len(lines[i]) - len(lines[i].lstrip("#")) <= level
        ),
        len(lines),
    )
    return "\n".join(lines[start:end])


def test_a_figure_whose_source_names_a_table_is_printed_in_that_table():
    named = 0
    for row in published.figures().itertuples():
        quoted = re.search(r"'([^']+)' table", row.source)
        if not quoted:
            continue
        named += 1
        section = seed_section(seed_text(row.source[5:8]), quoted.group(1))
        assert row.printed in section, (row.figure_id, quoted.group(1), row.printed)
    assert named >= 34  # the 28 of the C600 table and the 6 product specs


def test_seed_001_table_has_the_seed_columns_and_14_rows():
    table = published.seed_table("bytemlperf_c600")
    assert list(table.columns) == [
        "Model name",
        "Precision",
        "QPS",
        "Dataset",
        "Metric name",
        "Metric value",
    ]
    assert len(table) == 14
    text = seed_text("001")
    for row in table.itertuples(index=False):
        assert "| " + " | ".join(row) + " |" in text, row


def test_seed_000_table_has_six_rows():
    table = published.seed_table("bytemlperf_c600_older")
    assert len(table) == 6
    assert table.iloc[0]["QPS"] == "2,938"


def test_c2_tables_match_the_paper():
    t = published.c2_tables()
    assert list(t.index) == [2, 4, 6, 8, 10, 12]
    assert t.loc[2, "Latency"] == 1.36 and t.loc[12, "Throughput"] == 2526.35
    assert t.loc[10, "Energy efficiency"] == 9.68


def test_c2_setup_facts_present():
    facts = set(published.c2_setup()["metric"])
    assert {"Parameters", "IPUs used", "Micro batch per IPU", "SDK version", "Images"} <= facts


def test_claims_of_seed_004_present():
    f = published.figures()
    claims = f[f["table"] == "claims"]
    assert set(claims["printed"]) >= {
        "just over 9 minutes",
        "14.5 minutes",
        "2.1x",
        "1.6x",
        "1.5x",
        "1.3X",
    }


def test_reports_copy_matches_the_reference():
    ref = pd.read_csv(
        shared_or_skip("reference", "bytemlperf_ipu_reports.csv"), dtype=str, keep_default_na=False
    )
    ours = published.reports()[ref.columns]
    pd.testing.assert_frame_equal(ours.reset_index(drop=True), ref)


def test_audit_finds_the_seven_readme_disagreements_at_5_decimals():
    a = published.audit_readme_vs_reports()
    bad = a[~a["agree"]]
    assert len(bad) == 7
    # 0.76824 in the README vs 0.7682 (0.76820) in the JSON: ByteMLPerf's 5 decimals tell them apart
    fp8 = a[
        (a["model"] == "resnet50-torch-fp32") & (a["precision"] == "FP8") & (a["figure"] == "Top-1")
    ]
    assert not bool(fp8["agree"].iloc[0])
    assert any(
        "resnet50-torch-fp32 FP8 Top-1 0.76824 vs 0.7682" in f for f in published.audit_findings()
    )


def test_audit_c2_throughput_and_power():
    c2 = published.audit_c2()
    assert c2["Throughput gap %"].abs().max() < 0.5
    assert c2["Implied card power W"].between(200, 300).all()


def test_same_at_bytemlperf_precision():
    assert not published.same_at_bytemlperf_precision("0.76824", "0.7682")
    assert published.same_at_bytemlperf_precision("0.7682", "0.76820")
    assert published.same_at_bytemlperf_precision("13499", "13499.000001")


def test_loading_a_malformed_published_file_names_file_row_and_column(tmp_path):
    from kit.published.schema import PublishedDataError

    text = (published.published_dir() / "figures.csv").read_text().splitlines()
    text[1] += ",stray"
    (tmp_path / "figures.csv").write_text("\n".join(text) + "\n")
    with pytest.raises(PublishedDataError, match=r"figures.csv: line 2: 15 fields"):
        published._read("figures.csv", tmp_path)


def test_unknown_seed_table_lists_known():
    with pytest.raises(KeyError, match="bytemlperf_c600"):
        published.seed_table("nope")


def test_ipu_run_settings():
    s = published.ipu_run_settings("resnet50-torch-fp32", "FP16")
    assert s["batch_sizes"] == [4, 32] and s["clients"] == 4


def test_data_readme_states_the_row_counts_of_figures_csv():
    """The README says what figures.csv holds, study by study; it must not drift from the file."""
    import re
    from pathlib import Path

    import pandas as pd

    root = Path(__file__).resolve().parents[2] / "data" / "published"
    text = (root / "README.md").read_text()
    stated = {m[0]: int(m[1]) for m in re.findall(r"^\| `(\w+)` \| (\d+) \|", text, re.M)}
    counts = pd.read_csv(root / "figures.csv").groupby("study").size().to_dict()
    assert stated == counts
    assert (
        f"{sum(counts.values())} figures selected" in text
        and "every number of the five seed" not in text
    )
