"""kit.published.studies: the published studies are one enum, that the data, the kit and the
notebooks name them by."""

import json
import re

import nbformat
import pytest

from kit.errors import UnknownValueError
from kit.publish import card_table
from kit.published import figures as published
from kit.published.studies import BYTEMLPERF_STUDIES, PublishedStudy
from tests.conftest import ROOT


def test_the_enum_and_the_figures_name_the_same_studies():
    in_data = set(published.figures()["study"])
    # the report JSONs' per-batch rows are a scorecard study of their own, from another file
    assert in_data == {s.value for s in PublishedStudy} - {PublishedStudy.BYTEMLPERF_REPORTS}


def test_members_are_the_strings_the_scorecard_writes():
    assert json.dumps([PublishedStudy.C2_QWANT]) == '["c2_qwant"]'
    assert PublishedStudy.BYTEMLPERF_C600 == "bytemlperf_c600"
    assert (
        {s for s in PublishedStudy if s.is_bytemlperf}
        == BYTEMLPERF_STUDIES
        == {"bytemlperf_c600", "bytemlperf_c600_older", "bytemlperf_reports"}
    )


def test_a_bad_study_is_named_with_the_allowed_ones():
    with pytest.raises(UnknownValueError, match="published study 'c2_qwnat'; known: .*c2_qwant"):
        PublishedStudy.parse("c2_qwnat")
    with pytest.raises(UnknownValueError, match="c2_qwnat"):
        card_table.study_table(None, "c2_qwnat")


def test_seed_tables_are_read_by_member_or_by_its_string():
    by_member = published.seed_table(PublishedStudy.BYTEMLPERF_C600)
    assert by_member.equals(published.seed_table("bytemlperf_c600"))


def test_notebook_cells_name_studies_by_the_enum():
    quoted = re.compile("|".join(rf"[\"']{re.escape(s.value)}[\"']" for s in PublishedStudy))
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for cell in nbformat.read(str(path), as_version=4).cells:
            if cell.cell_type == "code":
                assert not quoted.search(cell.source), (path.name, cell.source)
