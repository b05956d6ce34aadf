"""What one row's search measures with at one batch, made once by `kit.search.row.search_row` and
read by the measuring (kit.search.measuring) and the runoff (kit.search.runoff): the model, its
inputs at the batch, each probe's timed window, and the session keeper (kit.search.keeping) that
holds a torch.compile leader open for the row's measurement.
"""

from __future__ import annotations

from dataclasses import dataclass

from kit.measure.window import MeasureConfig
from kit.models.spec import ExportedModel
from kit.search.keeping import KEEPS_NOTHING, SessionKeeper


@dataclass(frozen=True, kw_only=True)
class SearchContext:
    """One row's search at `batch`: `model`, its `inputs` at that batch, a probe's timed `window`,
    and the `keeper` of the session the row's measurement takes (none kept: KEEPS_NOTHING)."""

    model: ExportedModel
    inputs: dict
    batch: int
    window: MeasureConfig
    keeper: SessionKeeper = KEEPS_NOTHING
