"""Each published row at its fastest on the hardware at hand: a cached per-row search over backends,
precisions and compilation, gated by precision class and numerics.

`decide(model, published, batch, kind, SearchSettings(...))` returns the row's `Decision` (the
chosen plan, the ratio to today's mapping, and every candidate's probe), from the cache when one
fits.

Floor 6 of kit/ (docs/architecture.md): imports kit.backends and every floor below it.
"""

from kit.search.cache import decision_key, key_hash, load_decision
from kit.search.candidates import RowCandidate, row_candidates
from kit.search.cost import search_cost
from kit.search.decision import Decision, Plan
from kit.search.keeping import KEEPS_NOTHING, SessionKeeper
from kit.search.planning import SearchSettings
from kit.search.row import decide, search_row

__all__ = [
    "KEEPS_NOTHING",
    "Decision",
    "Plan",
    "RowCandidate",
    "SearchSettings",
    "SessionKeeper",
    "decide",
    "decision_key",
    "key_hash",
    "load_decision",
    "row_candidates",
    "search_cost",
    "search_row",
]
