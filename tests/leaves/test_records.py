"""The section records are what a result holds and writes: the JSON round-trips through them
losslessly, for every fixture (at each schema version) and for the odd values an older kit wrote."""

import json
import warnings
from dataclasses import replace
from pathlib import Path

import pytest

from kit.errors import KitError
from kit.results import SECTIONS, RunResult, SectionAsDict
from kit.results.schema import SCHEMA_VERSION, update_to_2, update_to_3, update_to_4, upgrade
from kit.results.sections import BackendInfo, Environment, ModelInfo, Resources, Weights
from kit.results.session import Session
from kit.results.tables import C2Row, FailedBatch, PeakRow, RooflineRow, Tables, TimeAccount
from kit.results.values import Record
from kit.results.windows import AccuracyCheck, Measurement, NumericCheck

DATA = Path(__file__).parents[1] / "data"
FIXTURES = sorted(DATA.rglob("*.json"))


def _versions(path: Path) -> dict[int, dict]:
    """The fixture at schema 1 (as stored), 2, 3, 4 and the current one (upgraded, as a kit of that
    version wrote it)."""
    v1 = json.loads(path.read_text())
    v3 = update_to_3(update_to_2(v1))
    return {1: v1, 2: update_to_2(v1), 3: v3, 4: update_to_4(v3), SCHEMA_VERSION: upgrade(v1)}


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
@pytest.mark.parametrize("version", sorted({1, 2, 3, 4, SCHEMA_VERSION}))
def test_every_fixture_survives_read_write_read_unchanged(tmp_path, path, version):
    given = tmp_path / "given.json"
    given.write_text(json.dumps(_versions(path)[version]))
    first = RunResult.read(given)
    again = RunResult.read(first.write(tmp_path / "again.json"))
    assert again.to_dict() == first.to_dict() and again.sections == first.sections
    assert json.loads((tmp_path / "again.json").read_text()) == upgrade(_versions(path)[version])


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_a_current_results_json_round_trips_exactly(tmp_path, path):
    text = json.dumps(upgrade(json.loads(path.read_text())), indent=1)
    (tmp_path / "r.json").write_text(text)
    assert RunResult.read(tmp_path / "r.json").write(tmp_path / "out.json").read_text() == text


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_each_section_record_writes_back_the_dict_it_read(path):
    data = upgrade(json.loads(path.read_text()))
    for name, record in SECTIONS.items():
        for d in data[name] if isinstance(data[name], list) else [data[name]]:
            assert record.from_dict(d).to_dict() == d, name
            assert list(record.from_dict(d).to_dict()) == list(d), name  # the keys in their order


@pytest.mark.parametrize(
    "record, d",
    [
        (Weights, {"source": "random", "label": None}),  # a null where the field is a string
        (
            Measurement,
            {
                "batch_size": 2,
                "mode": None,
                "threads": 0,
                "noise": {},
                "power": None,
                "intervals": None,
            },
        ),
        (
            Session,
            {"backend": "torch", "not_comparable": "one sentence, not a list", "placement": []},
        ),
        (
            Environment,
            {"kit": {}, "gpus": None, "allocator": None, "job": {"rerun": "kit rerun r.json"}},
        ),
        (Resources, {"peak_rss_bytes": 1.5e9, "method": "VmHWM"}),
        (NumericCheck, {"batch_size": 1, "mean_abs": 0.1, "histograms": {}}),
        (AccuracyCheck, {"metric": "Top-1", "reason_code": "no_dataset", "details": {"top5": 0.9}}),
    ],
)
def test_an_odd_value_is_kept_as_written_and_the_field_keeps_its_default(record, d):
    r = record.from_dict(d)
    assert r.to_dict() == d and list(r.to_dict()) == list(d)


def test_a_field_holds_what_readers_use_and_more_the_rest():
    m = Measurement.from_dict(
        {
            "batch_size": 2,
            "mode": None,
            "noise": {},
            "calls": [[[0, 5]]],
            "extra": {"clients": "threads"},
        }
    )
    assert (m.mode, m.noise, m.clients, m.call_times()) == ("single", None, "threads", [[(0, 5)]])
    assert m.more == {"mode": None, "noise": {}, "calls": [[[0, 5]]]}
    env = Environment.from_dict(
        {"host": "h", "job": {"rerun": "kit rerun r.json"}, "captured_at": "now"}
    )
    assert env.rerun == "kit rerun r.json" and env.more == {"captured_at": "now"}
    assert AccuracyCheck.from_dict({"reason_code": "no_dataset"}).code == "no_dataset"


def test_an_accuracy_check_an_older_kit_wrote_reads_its_weights_and_details_and_writes_back():
    written = {
        "model": "resnet50-torch-fp32",
        "dataset": "imagenet",
        "metric": "Top-1",
        "value": 0.5,
        "status": "measured",
        "reason_code": None,
        "data_percent": 1,
        "weights": {"source": "local", "label": "w"},
        "details": {"samples": 2, "batch_size": 1},
    }
    check = AccuracyCheck.from_dict(written)
    assert check.weights == {"source": "local", "label": "w"} and check.details["samples"] == 2
    assert check.more == {} and check.to_dict() == written
    before_weights = {k: v for k, v in written.items() if k not in ("weights", "details")}
    assert AccuracyCheck.from_dict(before_weights).to_dict() == before_weights


def test_a_replaced_field_is_written_where_its_key_was():
    w = Weights.from_dict({"source": "random", "label": None})
    assert replace(w, label="real").to_dict() == {"source": "random", "label": "real"}
    model = ModelInfo.from_dict({"name": "m", "weights": {"source": "random"}, "inputs": []})
    assert list(replace(model, params=7).to_dict()) == ["name", "weights", "inputs", "params"]
    backend = BackendInfo.from_dict({"name": "torch", "device": "cpu"})
    written = replace(backend, session=Session.from_dict({"threads": 2})).to_dict()
    assert written == {"name": "torch", "device": "cpu", "session": {"threads": 2}}


def test_a_record_made_in_code_writes_every_field():
    assert NumericCheck(batch_size=1, mean_abs=0.5).to_dict() == {
        "batch_size": 1,
        "mean_abs": 0.5,
        "std_abs": None,
        "max_abs": None,
        "mean_rel": None,
        "max_rel": None,
        "histograms": None,
    }
    made = NumericCheck(batch_size=1, more={"reference": "onnxruntime fp32 CPU"})
    assert made.to_dict()["reference"] == "onnxruntime fp32 CPU"


def test_a_section_given_as_a_dict_becomes_its_record_and_says_so():
    with pytest.warns(
        SectionAsDict, match="RunResult.numerics given as a dict: build its NumericCheck"
    ):
        r = RunResult(
            "model_benchmark",
            "m",
            parameters={},
            environment=Environment(),
            numerics=[{"batch_size": 1}],
        )
    assert r.numerics == [NumericCheck.from_dict({"batch_size": 1})]
    with pytest.warns(SectionAsDict):
        r.backend = {"name": "torch"}
    assert isinstance(r.backend, BackendInfo) and r.backend.name == "torch"
    with warnings.catch_warnings():
        warnings.simplefilter("error", SectionAsDict)
        r.backend = BackendInfo.from_dict({"name": "onnxruntime"})  # a record: no warning
        RunResult.from_dict(r.to_dict())  # read from JSON: no warning


def test_a_section_its_record_cannot_hold_is_named_when_the_file_is_read(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(
        json.dumps(
            {
                "schema_version": SCHEMA_VERSION,
                "kind": "model_benchmark",
                "name": "x",
                "parameters": {},
                "environment": {},
                "measurements": [{"throughput": 1.0}],
            }
        )
    )
    with pytest.raises(KitError, match="r.json: its measurements cannot be read"):
        RunResult.read(path)


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_every_fixtures_tables_read_as_their_records(path):
    written = upgrade(json.loads(path.read_text()))["tables"]
    tables = RunResult.from_dict(upgrade(json.loads(path.read_text()))).tables
    assert isinstance(tables, Tables) and tables.more == {}  # every table one the record names
    rows = {"c2": C2Row, "roofline": RooflineRow, "peaks": PeakRow}
    for name, row in rows.items():
        assert len(getattr(tables, name)) == len(written.get(name, []))
        assert all(isinstance(r, row) for r in getattr(tables, name))
    assert isinstance(tables.time_account, TimeAccount) and tables.time_account.phases
    assert tables.to_dict() == written and list(tables.to_dict()) == list(written)


def test_tables_are_written_in_the_order_the_study_wrote_them_and_never_changed_in_place():
    fresh = Tables()
    t = fresh.with_table("peaks", []).adding("failed_batches", {"batch_size": 4, "error": "oom"})
    t = t.adding("failed_batches", FailedBatch(batch_size=8, error="gone"))
    t = t.with_table("counts", {"ok": 1}).with_table("roofline", [{"batch_size": 4, "x": 1}])
    assert fresh.to_dict() == {} and t.failed(8) == "gone" and t.failed(2) is None
    assert t.to_dict() == {
        "peaks": [],
        "failed_batches": [{"batch_size": 4, "error": "oom"}, {"batch_size": 8, "error": "gone"}],
        "counts": {"ok": 1},  # a table the kit does not name: kept as JSON
        "roofline": [{"batch_size": 4, "x": 1}],
    }
    assert isinstance(t.roofline[0], Record) and t.roofline[0].more == {"x": 1}
    assert (
        Tables.from_dict(t.to_dict()) == t
        and Tables.from_dict(t.to_dict()).to_dict() == t.to_dict()
    )
    with pytest.raises(ValueError, match="'roofline'"):
        t.with_table("roofline", [{"no_batch_size": 1}])  # a study writes the rows the kit reads
    with pytest.raises(TypeError):
        t["roofline"] = []  # no table is changed in place


def test_tables_given_as_a_dict_become_the_record_and_say_so():
    with pytest.warns(SectionAsDict, match="RunResult.tables given as a dict: build its Tables"):
        r = RunResult(
            "model_benchmark",
            "m",
            parameters={},
            environment=Environment(),
            tables={"failed_batches": [{"batch_size": 2, "error": "oom"}]},
        )
    assert isinstance(r.tables, Tables) and r.tables.failed(2) == "oom"


def _result_file(tmp_path, **sections):
    path = tmp_path / "r.json"
    data = {
        "schema_version": SCHEMA_VERSION,
        "kind": "model_benchmark",
        "name": "x",
        "parameters": {},
        "environment": {},
        **sections,
    }
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("batch", [None, "32", 32.5, True])
def test_a_measurement_whose_batch_size_is_no_integer_is_named_when_the_file_is_read(
    tmp_path, batch
):
    # a null batch size was read as one, and the scorecard and kit compare raised a TypeError
    path = _result_file(tmp_path, measurements=[{"batch_size": batch, "throughput": 1.0}])
    with pytest.raises(KitError, match=r"r.json: its measurements cannot be read .*batch_size="):
        RunResult.read(path)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("model", [{"name": "resnet50"}]),
        ("backend", [{"name": "onnxruntime"}]),
        ("environment", [{"cpu": {"model": "AMD EPYC"}}]),
        ("resources", ["x"]),
        ("tables", [{"roofline": []}]),
        ("measurements", {"batch_size": 4}),
        ("measurements", [{"batch_size": 4}, "garbage"]),
        ("numerics", [None]),
        ("parameters", []),
        ("figures", {"a": 1}),
    ],
)
def test_a_section_of_another_shape_is_named_when_the_file_is_read(tmp_path, name, value):
    # it was read as an empty record (or its odd entries dropped), nothing kept
    with pytest.raises(KitError, match=f"r.json: its {name} cannot be read"):
        RunResult.read(_result_file(tmp_path, **{name: value}))


def test_an_unknown_status_is_named_with_the_file(tmp_path):
    # the error was built again from one argument: a TypeError that named neither
    path = _result_file(tmp_path, status="weird")
    with pytest.raises(KitError, match=r"r.json: unknown result status 'weird'"):
        RunResult.read(path)


@pytest.mark.parametrize("batch", [None, "4"])
def test_a_c2_table_whose_batch_size_is_no_integer_is_unread(batch):
    # it was read as C2 rows, and the report's C2 tables raised a KeyError
    rows = [{"batch_size": batch, "latency_ms": 1.0, "throughput": 2.0}]
    tables = Tables.from_dict({"c2": rows})
    assert tables.c2 == () and tables.unread == ("c2",) and tables.to_dict() == {"c2": rows}
