"""Issue 27 #4, a report read at a glance, checked on the pages of a real tiny batch without a
browser (tests/project/test_browser.py renders the same pages in Chromium): the index opens with one
sentence per study and the counts with their reasons grouped; the scorecard gives each reason
once and links every row it can to its model's report; the model report opens with its verdict
sentence, says why power is unavailable once, and has no NaN, None or empty table."""

import json
import re

import pytest

from kit.results import RunResult
from tests.html_pages import broken_links, read

MISSING = {"nan", "NaN", "None", "<NA>", "NaT"}


def _pages(site):
    out, index, records = site
    return index, out / records["summary"].html, out / records["resnet50_small"].html


def test_the_index_opens_with_a_sentence_per_study_and_the_grouped_reasons(published_site):
    index, _, _ = _pages(published_site)
    page = index.read_text()
    glance = page.index("class='glance'")
    assert glance < page.index("headline-chart") and glance < page.index("id='scorecard'")
    text = read(index).plain
    for study in (
        "ByteMLPerf's C600 table (seed 001): 28 figures published on Graphcore C600: ",
        "The per-batch figures of ByteMLPerf's report JSONs: ",
        "Qwant's C2 study (tables 1-3): 18 figures published on Graphcore C2 card: ",
        "The older ByteMLPerf table (seed 000): 12 figures",
    ):
        assert study in text, study
    assert re.search(
        r"\b0 reproduced, 0 differ, \d+ not comparable, \d+ not measured; measured here on .+ "
        r"\(CPU\)",
        text,
    )
    # the reasons grouped, each with how many rows and, where a user can act, what to do
    assert re.search(r"\b(\d+) not comparable: \1 measured on a CPU, not the C600\b", text)
    assert re.search(
        r"\b\d+ not measured: .*\d+ not selected in this batch \(make reproduce without ONLY\)",
        text,
    )
    assert re.search(r"\d+ random weights \(real weights: kit fetch-weights MODEL\)", text)


def test_scorecard_rows_give_batch_and_part_a_short_reason_once_and_a_link(published_site):
    index, summary, report = _pages(published_site)
    for page in (index, summary):
        tables = [t for t in read(page).tables if t and t[0][:2] == ["Figure", "Model, precision"]]
        assert tables, page.name
        rows = [r for t in tables for r in t[1:]]
        assert len(rows) >= 100, page.name  # every published figure
        qps = next(r for r in rows if r[0] == "QPS" and r[1] == "resnet50-torch-fp32 FP16")
        # the published value, its batch and part
        assert qps[2] == "13,499 samples/s batch 32 · C600"
        # measured beside it
        # with its interval: '± half-width', or '[low, high]' where it is not symmetric
        interval = r"(± [\d,.]+|\[[\d,.]+, [\d,.]+\])"
        assert re.fullmatch(rf"[\d,.]+ {interval} batch 32 · .+ \(CPU\)", qps[3]), qps[3]
        assert qps[5] == "not comparable"
        # the short reason is said once: in its column, then its full text in the details
        short = "measured on a CPU, not the C600"
        assert qps[6].startswith(short) and "published on c600" in qps[6]
        assert all(short not in cell for cell in qps[:6])
        assert not any(c in MISSING or not c for r in rows for c in r), page.name
        unmeasured = [r for r in rows if r[5] == "not measured"]
        # the reason is not repeated
        assert unmeasured and all(r[3] == "—" and r[4] == "—" for r in unmeasured)
        assert broken_links(page) == [], page.name
    page = index.read_text()
    # the row's 8 figures + the reports table
    assert page.count(f"href='{report.relative_to(index.parent).as_posix()}'") >= 8 + 1
    summary_page = summary.read_text()
    assert (
        summary_page.count(f'href="{report.name}"') + summary_page.count(f"href='{report.name}'")
        >= 8
    )


def test_the_model_report_opens_with_its_verdict_and_says_power_once(published_site):
    out, _, records = published_site
    report = out / records["resnet50_small"].html
    page = report.read_text()
    result = RunResult.read(out / records["resnet50_small"].results)
    verdict = (
        page.index("class='verdict'")
        if "class='verdict'" in page
        else page.index('class="verdict"')
    )
    assert verdict < page.index("<table")  # before the provenance and every table
    opening = read(report).plain
    sentence = re.search(
        r"On .+?, resnet50-torch-fp32 reached [\d.,]+ samples/s at batch 32, against 13,499 "
        r"samples/s published on the C600 at batch 32: not comparable \(measured on a CPU, not "
        r"the C600\)\. Its 8 published figures: 0 reproduced, 0 differ, 7 not comparable, "
        r"1 not measured\.",
        opening,
    )
    assert sentence, opening[:800]
    measured = any(m.power is not None and m.power.measured for m in result.measurements)
    said = len(re.findall("power unavailable", opening, re.IGNORECASE))
    assert said == (0 if measured else 1), said
    if not measured:
        assert "power (W)" not in page and "samples/s/W" not in page  # no column of the same reason


def test_no_report_table_holds_a_missing_value_and_an_empty_one_is_a_sentence(published_site):
    out, index, records = published_site
    for page in (index, out / records["summary"].html, out / records["resnet50_small"].html):
        cells = read(page).cells()
        assert cells and not [c for c in cells if c in MISSING or re.search(r"\bnan\b", c)], (
            page.name
        )
    report = read(out / records["resnet50_small"].html)
    # the run was not searched: one sentence, no table of headers over nothing
    assert "Not searched: this run used the configuration its parameters name" in report.plain
    assert not [t for t in report.tables if t and "candidate" in t[0] and len(t) == 1]
    data = json.loads((out / records["resnet50_small"].results).read_text())
    assert not data["tables"].get("search")


@pytest.mark.parametrize("job", ["resnet50_small", "summary"])
def test_every_link_resolves(published_site, job):
    out, index, records = published_site
    assert broken_links(index) == []
    assert broken_links(out / records[job].html) == []


def test_summary_links_point_from_its_own_folder_to_each_report(outputs):
    import os

    from kit.notebook import report_links
    from kit.paths import notebooks_dir

    for run in ("r1", "r2"):
        (outputs / "runs" / run).mkdir(parents=True)
        for name in ("a.json", "a.html", "b.json"):  # b has no report: no link
            (outputs / "runs" / run / name).write_text("{}")
    links = report_links(
        ["runs/r1/a.json", "runs/r1/b.json"], str(outputs / "runs" / "r3" / "summary.json")
    )
    # by job name, and by result (the report a row that read runs/r1/a.json links to)
    assert links == {"a": "../r1/a.html", "runs/r1/a.json": "../r1/a.html"}
    # in JupyterLab (no results_path): every run's, the latest wins, relative to the notebook's
    # folder
    here = lambda run: os.path.relpath(outputs / "runs" / run / "a.html", notebooks_dir())  # noqa: E731
    assert report_links([]) == {
        "a": here("r2"),
        "runs/r1/a.json": here("r1"),
        "runs/r2/a.json": here("r2"),
    }
