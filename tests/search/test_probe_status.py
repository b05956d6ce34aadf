"""kit.search.probe's ProbeStatus: a probe's status is one enum, read and written as the strings
the search cache and the result's search table hold."""

import json

import pytest

from kit.errors import UnknownValueError
from kit.search.decision import Decision
from kit.search.probe import FAILED, STATUSES, Probe, ProbeStatus

PROBE = {
    "label": "onnxruntime fp32 (cpu)",
    "backend": "onnxruntime",
    "precision": "fp32",
    "device": "cpu",
    "options": {},
    "threads": None,
    "native": True,
    "why": "the fp32 CPU reference",
}


def test_the_values_are_the_strings_the_cache_holds():
    assert {s.value for s in ProbeStatus} == {
        "pending",
        "fallback",
        "measured",
        "chosen",
        "lost",
        "not eligible",
        "not probed",
        "failed",
        "failed numerics",
    }
    assert set(FAILED) < set(STATUSES) < set(ProbeStatus)


def test_a_probe_reads_its_status_as_a_member_and_writes_the_same_string():
    probe = Probe.from_dict({**PROBE, "status": "failed numerics"})
    assert probe.status is ProbeStatus.FAILED_NUMERICS and probe.status in FAILED
    assert json.loads(json.dumps(probe.to_dict()))["status"] == "failed numerics"
    assert Probe.from_dict(PROBE).status is ProbeStatus.NOT_PROBED


def test_an_unknown_probe_status_is_named_and_a_cache_file_holding_one_is_unreadable():
    with pytest.raises(UnknownValueError, match="unknown probe status 'won'; known: chosen, fail"):
        Probe.from_dict({**PROBE, "status": "won"})
    with pytest.raises(ValueError):  # what the search cache skips as an unreadable file
        Decision.from_dict(
            {
                "plan": {"backend": "onnxruntime", "precision": "fp32"},
                "probes": [{**PROBE, "status": "won"}],
            }
        )
