"""A job's fingerprint: what its output depends on, and nothing that only says how a run goes."""

from __future__ import annotations

from kit.batch.fingerprint import inputs_fingerprint
from kit.batch.profiles import jobs_for


def fingerprints(**options) -> dict[str, str]:
    return {
        j.name: inputs_fingerprint(j, digest="kit") for j in jobs_for("quick", "cpu", **options)
    }


def test_a_forced_search_measures_the_same_row_so_a_plain_run_reuses_it():
    """`make reproduce FORCE=1` re-searched every row under another fingerprint, so the plain run
    after it ran every job again (a full profile: about 20 minutes) though nothing it measures
    changed."""
    plain, forced = fingerprints(), fingerprints(research=True)
    assert forced == plain
    assert fingerprints(search=False) != plain  # no search measures another configuration
