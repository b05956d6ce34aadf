"""`kit import-bytemlperf DIR`: every vendor's ByteMLPerf reports checked, kept under outputs/ and
set beside the scorecard's rows with their source file; the IPU reports give exactly the figures
the kit already holds in data/published/."""

import json
import re
import shutil

import pytest

from kit.cli.main import main
from kit.publish import scorecard
from kit.publish.card_table import scorecard_table
from kit.publish.imported_reports import check_against_published, figures, imported_dir
from tests.conftest import shared_or_skip


def test_importing_the_ipu_reports_reproduces_the_figures_the_kit_holds(outputs, capsys):
    source = shared_or_skip("reference", "bytemlperf_reports", "IPU")
    assert main(["import-bytemlperf", str(source)]) == 0
    out = capsys.readouterr().out
    assert "imported 14 reports (IPU 14)" in out
    assert (
        "IPU: 305 figures equal to data/published/bytemlperf_ipu_reports.csv (every figure the kit "
        "holds)" in out
    )
    found = figures()
    assert str(imported_dir()).startswith(str(outputs))  # kept under outputs/, not data/published/
    assert check_against_published(found) == (305, [])
    assert set(found["source"].map(lambda s: s.split("/bytemlperf/", 1)[1].split("/")[0])) == {
        "IPU"
    }

    copy = imported_dir() / "IPU" / "resnet50-torch-fp32" / "result-fp16.json"
    report = json.loads(copy.read_text())
    report["Performance"][1]["QPS"] = 13541  # one figure off by one
    copy.write_text(json.dumps(report))
    same, problems = check_against_published(figures())
    assert same == 304 and problems == [
        "resnet50-torch-fp32 FP16 Performance/QPS batch 32: 13542 in data/published, 13541 in "
        f"{copy}"
    ]


def test_every_vendor_sits_beside_the_scorecard_rows_with_its_source(outputs, capsys):
    assert main(["import-bytemlperf", str(shared_or_skip("reference", "bytemlperf_reports"))]) == 0
    out = capsys.readouterr().out
    assert "imported 30 reports (HPU 5, IPU 14, SPU 5, STC 6)" in out
    assert "once the summary runs again: `make reproduce ONLY=summary`" in out
    card = scorecard.build([])
    assert {
        "HPU published",
        "HPU source",
        "SPU published",
        "STC published",
        "IPU published",
    } <= set(card.columns)
    row = card[
        (card["study"] == "bytemlperf_reports")
        & (card["model"] == "resnet50-torch-fp32")
        & (card["precision"] == "FP16")
        & (card["figure"] == "QPS")
        & (card["batch_size"] == "32")
    ].iloc[0]
    assert row["HPU published"] == 7843
    assert row["HPU source"].endswith("HPU/resnet50-torch-fp32/result-fp32.json (FP32)")
    assert row["IPU published"] == row["published"] == 13542  # the same figure as data/published's
    assert row["verdict"] == "not measured"  # imported columns never make a verdict
    shown = scorecard.display_table(card)
    assert "HPU source" in shown.columns


def test_every_vendor_shows_in_the_scorecard_html_beside_its_row(outputs, capsys):
    """The README said the scorecard shows them beside each per-batch row; no HTML page did."""
    assert main(["import-bytemlperf", str(shared_or_skip("reference", "bytemlperf_reports"))]) == 0
    records = scorecard.build([]).to_dict("records")
    page = scorecard_table(records)
    heads = re.findall(
        r"<th data-col='(\d+)' data-type='num'>(\w+): its own ByteMLPerf report</th>", page
    )
    assert [b for _, b in heads] == ["HPU", "IPU", "SPU", "STC"] and [int(i) for i, _ in heads] == [
        7,
        8,
        9,
        10,
    ]
    rows = [
        r
        for r in page.split("<tr data-verdict=")[1:]
        if "HPU/resnet50-torch-fp32/result-fp32.json (FP32)" in r
    ]
    qps = next(r for r in rows if r.startswith("'not measured'><td>QPS</td>") and ">13,542 " in r)
    cells = qps.split("<td")
    assert len(cells) == 1 + 7 + 4  # the scorecard's 7 columns, then one per vendor
    assert (
        "data-v='7843.0'" in cells[8]
        and ">7,843 " in cells[8]
        and "HPU/resnet50-torch-fp32/result-fp32.json (FP32)" in cells[8]
    )
    assert (
        "data-v='13542.0'" in cells[9] and "IPU/resnet50-torch-fp32/result-fp16.json<" in cells[9]
    )
    no_vendor = scorecard_table(
        [{k: v for k, v in r.items() if not k.endswith((" published", " source"))} for r in records]
    )
    assert "its own ByteMLPerf report" not in no_vendor  # nothing imported: no empty columns


def test_a_bad_report_stops_the_import_naming_file_and_field(outputs, tmp_path, capsys):
    folder = tmp_path / "reports"
    shutil.copytree(shared_or_skip("reference", "bytemlperf_reports", "HPU"), folder / "HPU")
    bad = folder / "HPU" / "bert-torch-fp32" / "result-fp32.json"
    report = json.loads(bad.read_text())
    report["Performance"][0]["QPS"] = "fast"
    bad.write_text(json.dumps(report))
    assert main(["import-bytemlperf", str(folder)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}: Performance[0].QPS is 'fast', not number" in err
    assert not imported_dir().exists()  # nothing copied
    assert main(["import-bytemlperf", str(tmp_path / "nowhere")]) == 2
    assert "does not exist or is not a folder" in capsys.readouterr().err


def test_an_import_makes_the_scorecard_job_run_again(outputs, capsys):
    from kit.batch.fingerprint import result_hashes
    from kit.batch.jobs import Job

    summary, timed = (
        Job("summary", "summary.ipynb", {}, after_all=True),
        Job("m", "model_benchmark.ipynb", {}),
    )
    before = result_hashes(summary, outputs), result_hashes(timed, outputs)
    assert (
        main(["import-bytemlperf", str(shared_or_skip("reference", "bytemlperf_reports", "SPU"))])
        == 0
    )
    assert result_hashes(summary, outputs) != before[0]  # the scorecard reads the imported reports
    assert result_hashes(timed, outputs) == before[1]  # a timed job does not


@pytest.mark.parametrize(
    "backend", ["../../../../tmp/x", "..", ".", "", "/tmp/x", "IPU/../../x", "a\\b", "a\0b"]
)
def test_a_backend_that_is_not_a_plain_folder_name_is_refused_and_nothing_is_written(
    outputs, tmp_path, capsys, backend
):
    folder = tmp_path / "reports"
    shutil.copytree(shared_or_skip("reference", "bytemlperf_reports", "HPU"), folder / "HPU")
    bad = folder / "HPU" / "bert-torch-fp32" / "result-fp32.json"
    report = json.loads(bad.read_text())
    report["Backend"] = backend
    bad.write_text(json.dumps(report))
    into = tmp_path / "deep" / "er" / "into"
    assert main(["import-bytemlperf", str(folder), "--into", str(into)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}: field 'Backend' is {backend!r}, not a plain folder name" in err
    assert not into.exists()
    assert not (tmp_path / "x").exists() and not list(tmp_path.glob("deep/**/*.json"))
