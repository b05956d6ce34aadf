"""The scorecard's HTML table (kit.publish.card_table): each side's batch where it belongs."""

from __future__ import annotations

import re
from pathlib import Path

from kit.measure.window import BatchMeasurement
from kit.publish.card_table import scorecard_table
from kit.publish.scorecard import bytemlperf_rows
from tests.c600_runs import c600_result, calls_of


def test_the_measured_cell_shows_the_measured_batch_and_the_published_cell_the_published_one():
    """The headline QPS is published at batch 32; a run that measured batch 4 only shows it at 4."""
    b4 = BatchMeasurement(batch_size=4, mode="clients", threads=4, calls=[calls_of([3.0] * 30)] * 4)
    card = bytemlperf_rows([(Path("new.json"), c600_result("resnet50-torch-fp32", "FP16", [b4]))])
    headline = next(
        r
        for r in card
        if r.study == "bytemlperf_c600"
        and r.model == "resnet50-torch-fp32"
        and r.precision == "FP16"
        and r.figure == "QPS"
    )
    assert (headline.batch_size, headline.measured_batch) == ("32", "4")
    page = scorecard_table([headline.to_dict()], interactive=False)
    published, measured = re.findall(r"<td[^>]*>([^<]*<br><span class='sub'>[^<]*)</span>", page)
    assert "batch 32 · " in published and "batch 4 · " not in published
    assert "batch 4 · " in measured and "batch 32" not in measured
