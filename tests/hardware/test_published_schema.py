"""The published CSVs are checked against declared schemas when loaded: a malformed row is an
error naming the file, the line and the column (issue 14 #3)."""

import shutil
from pathlib import Path

import pandas as pd
import pytest

from kit.published.schema import SCHEMAS, PublishedDataError, read_published_csv

DATA = Path(__file__).resolve().parents[2] / "data" / "published"


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_shipped_files_pass_and_load_as_pandas_would(name):
    checked = read_published_csv(DATA / name)
    plain = pd.read_csv(DATA / name, dtype=str, keep_default_na=False)
    pd.testing.assert_frame_equal(checked, plain)


def _copy_with(tmp_path, name, edit):
    lines = (DATA / name).read_text(encoding="utf-8").splitlines()
    edit(lines)
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _set(lines, line, column, value, name="figures.csv"):
    import csv
    import io

    header = next(csv.reader([lines[0]]))
    row = next(csv.reader([lines[line - 1]]))
    row[header.index(column)] = value
    out = io.StringIO()
    csv.writer(out, lineterminator="").writerow(row)
    lines[line - 1] = out.getvalue()


def _line_of(name, **match):
    df = pd.read_csv(DATA / name, dtype=str, keep_default_na=False)
    hit = df.index[(df[list(match)] == pd.Series(match)).all(axis=1)][0]
    return int(hit) + 2


def test_an_extra_field_in_the_first_data_row_is_named(tmp_path):
    path = _copy_with(tmp_path, "figures.csv", lambda ls: ls.__setitem__(1, ls[1] + ",extra"))
    with pytest.raises(
        PublishedDataError, match=r"figures.csv: line 2: 15 fields where the header has 14"
    ):
        read_published_csv(path)


def test_a_short_row_is_named(tmp_path):
    path = _copy_with(
        tmp_path, "figures.csv", lambda ls: ls.__setitem__(5, "bytemlperf_c600:900,x")
    )
    with pytest.raises(PublishedDataError, match="line 6: 2 fields"):
        read_published_csv(path)


def test_a_non_numeric_qps_is_an_error(tmp_path):
    line = _line_of("figures.csv", study="bytemlperf_c600", metric="QPS", model="albert-torch-fp32")
    path = _copy_with(tmp_path, "figures.csv", lambda ls: _set(ls, line, "value", "3,28O"))
    with pytest.raises(
        PublishedDataError, match=rf"line {line}, column 'value': '3,28O': not a finite number"
    ):
        read_published_csv(path)


def test_a_c2_latency_of_zero_is_an_error(tmp_path):
    line = _line_of("figures.csv", study="c2_qwant", metric="Latency", batch_size="2")
    path = _copy_with(tmp_path, "figures.csv", lambda ls: _set(ls, line, "value", "0"))
    with pytest.raises(
        PublishedDataError, match=rf"line {line}, column 'value': '0': Latency must be positive"
    ):
        read_published_csv(path)


def test_empty_required_cell_bad_batch_and_duplicate_id(tmp_path):
    path = _copy_with(tmp_path, "figures.csv", lambda ls: _set(ls, 3, "source", ""))
    with pytest.raises(PublishedDataError, match="line 3, column 'source': empty"):
        read_published_csv(path)
    line = _line_of("figures.csv", study="c2_qwant", metric="Latency", batch_size="2")
    path = _copy_with(tmp_path, "figures.csv", lambda ls: _set(ls, line, "batch_size", "1.5"))
    with pytest.raises(
        PublishedDataError, match="column 'batch_size': '1.5' is not a positive whole number"
    ):
        read_published_csv(path)
    path = _copy_with(tmp_path, "figures.csv", lambda ls: ls.insert(3, ls[1]))
    with pytest.raises(PublishedDataError, match="line 4, column 'figure_id': .* repeats line 2"):
        read_published_csv(path)


def test_report_qps_and_spec_clients(tmp_path):
    line = _line_of("bytemlperf_ipu_reports.csv", metric="Performance/QPS")
    path = _copy_with(
        tmp_path, "bytemlperf_ipu_reports.csv", lambda ls: _set(ls, line, "value", "-3")
    )
    with pytest.raises(PublishedDataError, match="Performance/QPS must be positive"):
        read_published_csv(path)
    path = _copy_with(
        tmp_path, "bytemlperf_model_specs.csv", lambda ls: _set(ls, 2, "max_batch_size", "0")
    )
    with pytest.raises(
        PublishedDataError, match="bytemlperf_model_specs.csv: line 2, column 'max_batch_size'"
    ):
        read_published_csv(path)


def test_wrong_header_and_unknown_file(tmp_path):
    path = _copy_with(
        tmp_path, "figures.csv", lambda ls: ls.__setitem__(0, ls[0].replace("printed", "shown"))
    )
    with pytest.raises(
        PublishedDataError,
        match=r"line 1: header .* \(missing \['printed'\], unexpected \['shown'\]",
    ):
        read_published_csv(path)
    other = tmp_path / "other.csv"
    shutil.copy(DATA / "figures.csv", other)
    with pytest.raises(PublishedDataError, match="no declared schema"):
        read_published_csv(other)


def test_a_duplicated_row_under_another_figure_id_is_refused_with_file_and_line(tmp_path):
    """It gave a raw 'cannot handle a non-unique multi-index' from headline_rows()."""
    line = _line_of("figures.csv", study="bytemlperf_c600", metric="QPS", model="albert-torch-fp32")

    def duplicate(lines):
        lines.append(lines[line - 1])
        _set(lines, len(lines), "figure_id", "bytemlperf_c600:999")

    path = _copy_with(tmp_path, "figures.csv", duplicate)
    with pytest.raises(PublishedDataError) as caught:
        read_published_csv(path)
    assert str(caught.value).startswith(
        f"{path}: line {len(path.read_text().splitlines())}: duplicates "
        f"line {line} (study='bytemlperf_c600', table='models', "
        f"model='albert-torch-fp32', precision='FP16', batch_size='', metric='QPS')"
    )


def test_a_duplicated_report_qps_row_is_refused_not_averaged(tmp_path, monkeypatch):
    """per_batch_table() averaged the pair; `kit reproduce` died with a raw pandas error."""
    from kit.published import figures

    line = _line_of("bytemlperf_ipu_reports.csv", metric="Performance/QPS")
    (tmp_path / "data").mkdir()
    published = tmp_path / "data" / "published"
    shutil.copytree(DATA, published)

    def duplicate(lines):
        lines.insert(line, lines[line - 1])
        _set(lines, line + 1, "value", "1")

    _copy_with(published, "bytemlperf_ipu_reports.csv", duplicate)
    monkeypatch.setenv("KIT_ROOT", str(tmp_path))
    figures.reports.cache_clear()
    try:
        with pytest.raises(
            PublishedDataError,
            match=rf"bytemlperf_ipu_reports.csv: line {line + 1}: "
            rf"duplicates line {line} \(model=",
        ):
            figures.per_batch_table()
    finally:
        figures.reports.cache_clear()


def test_kit_reproduce_names_a_duplicated_report_row_in_one_line(tmp_path, monkeypatch, capsys):
    """`kit reproduce` died with a raw pandas error on a duplicated QPS row."""
    from kit.cli.main import main as kit_main
    from kit.published import figures

    line = _line_of("bytemlperf_ipu_reports.csv", metric="Performance/QPS")
    published = tmp_path / "data" / "published"
    shutil.copytree(DATA, published)
    _copy_with(published, "bytemlperf_ipu_reports.csv", lambda ls: ls.insert(line, ls[line - 1]))
    monkeypatch.setenv("KIT_ROOT", str(tmp_path))
    monkeypatch.setenv("KIT_OUTPUTS", str(tmp_path / "outputs"))
    for cached in (figures.figures, figures.reports, figures.model_specs):
        cached.cache_clear()
    try:
        assert kit_main(["reproduce", "--hardware", "cpu"]) == 2
    finally:
        for cached in (figures.figures, figures.reports, figures.model_specs):
            cached.cache_clear()
    err = capsys.readouterr().err.strip()
    assert err.startswith(
        f"error: {published / 'bytemlperf_ipu_reports.csv'}: line {line + 1}: duplicates line "
        f"{line}"
    )
    assert "\n" not in err


def test_a_study_no_enum_names_is_an_error_naming_the_allowed_ones(tmp_path):
    line = _line_of("figures.csv", study="c2_qwant", metric="Latency", batch_size="2")
    path = _copy_with(tmp_path, "figures.csv", lambda ls: _set(ls, line, "study", "c2_qwnat"))
    with pytest.raises(
        PublishedDataError,
        match=rf"line {line}, column 'study': 'c2_qwnat' is not one of "
        r"bytemlperf_c600, bytemlperf_c600_older, .*c2_qwant",
    ):
        read_published_csv(path)


def test_a_report_precision_in_run_spelling_is_an_error(tmp_path):
    name = "bytemlperf_ipu_reports.csv"
    path = _copy_with(tmp_path, name, lambda ls: _set(ls, 2, "precision", "fp16", name))
    with pytest.raises(
        PublishedDataError,
        match=r"line 2, column 'precision': 'fp16' is not one of FP32, FP16, FP8",
    ):
        read_published_csv(path)
