"""The study contract, over every registered study, with the fake backend where a run is needed."""

from pathlib import Path

import pytest

from kit.batch.profiles import jobs_for, row_plan
from kit.batch.time_plan import FLOORS
from kit.errors import InvalidParameter
from kit.hardware.environment import capture
from kit.measure.power.base import PowerSampler, Reading
from kit.paths import notebooks_dir
from kit.publish import scorecard
from kit.publish.report.provenance import METHODS
from kit.published import figures as published
from kit.results import ResultKind, RunResult
from kit.studies import STUDIES, c2, model_benchmark, server

FAST_MODEL = dict(
    model="resnet50-torch-fp32",
    small=True,
    backend="fake",
    batch_sizes=[1, 2],
    warmup=2,
    min_duration_s=0.05,
    min_count=5,
    check_numerics=False,
    accuracy=False,
    target_ci=0.0,
)
NOTEBOOK_STUDY = {
    "model_benchmark.ipynb": "model_benchmark",
    "c2_study.ipynb": "c2_study",
    "server_scenario.ipynb": "server_scenario",
}


class ConstantSampler(PowerSampler):
    name = "constant"

    @property
    def sensor(self) -> str:
        return "a constant 10 W test sensor"

    def probe(self):
        return None

    def read(self) -> Reading:
        return Reading(watts=10.0)


@pytest.mark.parametrize("name", STUDIES.names())
def test_every_study_has_valid_defaults_and_a_config_round_trip(name):
    study = STUDIES.get(name)
    config = study.config()
    assert study.config(**config.to_dict()) == config


@pytest.mark.parametrize("name", STUDIES.names())
def test_every_study_turns_bad_parameters_into_a_result_not_an_exception(name):
    study = STUDIES.get(name)
    unknown = study.run({"no_such_parameter": 1})
    assert (
        unknown.status == "error"
        and "invalid parameters=['no_such_parameter']" in unknown.errors[0]
    )
    wrong_type = study.run({"small": "yes"})
    assert wrong_type.errors == ["InvalidParameter: invalid small='yes': True or False"]
    assert wrong_type.kind == ResultKind(name)


def test_model_benchmark_on_the_fake_backend_keeps_warmup_outside_the_window(
    outputs, fake_backend, monkeypatch
):
    from kit.studies import model_benchmark as mb

    monkeypatch.setattr(mb, "sampler_for", lambda device, enabled, **kw: ConstantSampler())
    result = model_benchmark.run({**FAST_MODEL, "warmup": 100})
    assert result.status == "ok", result.errors
    for m in result.measurements:
        assert m.latency.count >= 5 and m.latency.mean_ms >= 2.0
        assert m.power.method == "measured" and m.power.mean_w == pytest.approx(10.0)
        # the power window holds the timed calls only: 100 warm-up calls (>= 200 ms) are outside it
        assert abs(m.power.more["duration_s"] - m.more["wall_time_s"]) < 0.1
    assert [s.closed for s in fake_backend.sessions] == [True, True]
    assert any("as given in the parameters" in n for n in result.notes)


def test_a_failing_batch_is_recorded_and_its_sessions_closed(outputs, fake_backend, monkeypatch):
    from kit.errors import KitError
    from tests.fake_backend import FakeSession

    def broken(self, inputs):
        raise KitError("the device went away")

    monkeypatch.setattr(FakeSession, "bind", broken)
    result = model_benchmark.run(FAST_MODEL)
    assert result.status == "error"
    assert result.errors == ["batch 1: the device went away", "batch 2: the device went away"]
    assert result.tables.to_dict()["failed_batches"] == [
        {"batch_size": 1, "error": "the device went away"},
        {"batch_size": 2, "error": "the device went away"},
    ]
    assert fake_backend.sessions and all(s.closed for s in fake_backend.sessions)


def test_an_unexpected_exception_still_ends_as_a_result(outputs, fake_backend, monkeypatch):
    from tests.fake_backend import FakeSession

    monkeypatch.setattr(FakeSession, "bind", lambda self, inputs: 1 / 0)
    result = model_benchmark.run(FAST_MODEL)
    assert result.status == "error" and "ZeroDivisionError" in result.errors[0]
    assert fake_backend.sessions and all(s.closed for s in fake_backend.sessions)


@pytest.mark.parametrize("model", ["roformer-tf-fp32", "widedeep-tf-fp32", "resnet50-torch-fp32"])
def test_the_precision_note_of_the_plan_reaches_the_result_unchanged(
    outputs, fake_backend, model, monkeypatch
):
    """Bug (issue 11): the ORT fp16 rows' reports said 'bf16 (torch)': the benchmark rebuilt the
    note with framework='torch'. The plan's note now travels in the job parameters."""
    job = next(j for j in jobs_for("quick", "cpu") if j.name == f"{model}_FP16")
    plan = row_plan(model, "FP16", "cpu")
    assert (
        job.parameters["precision_note"] == plan.note
        and job.parameters["backend"] == plan.placement.backend
    )
    result = model_benchmark.run(
        {**FAST_MODEL, "precision_note": plan.note, "precision": "fp32", "batch_sizes": [1]}
    )
    assert f"Precision: {plan.note}." in result.notes
    if plan.placement.backend == "onnxruntime":  # the note names what runs, never "bf16 (torch)"
        assert "-> bf16" not in plan.note and plan.placement.precision in plan.note


@pytest.mark.parametrize("kind", ["cpu", "cuda", "ipu"])
def test_every_job_builds_a_valid_config_on_the_hardware_it_was_given(kind):
    """Bug (issue 11): the server job got no hardware (HARDWARE=cuda still served on the CPU) and
    C2 worked its device out again from its own table."""
    jobs = jobs_for("quick", kind)
    devices = set()
    for job in jobs:
        study = NOTEBOOK_STUDY.get(job.notebook)
        if study:
            config = STUDIES.get(study).config(**job.parameters)
            devices.add(config.device)
    from kit.hardware.kinds import kind_of

    assert {kind_of(d) for d in devices} == {kind}
    names = [j.name for j in jobs]
    assert len(names) == len(set(names)) == len(published.headline_rows()) + 4


def test_an_ipu_jobs_limit_grows_by_a_load_timeout_per_compilation_still_to_do(
    tmp_path, monkeypatch
):
    """Issue 52: the job limit (900 s quick) included PopRT's compilation, minutes per batch size: a
    first run on a C600 could time out mid-compile. Each uncached PopEF adds one load timeout; a
    cached one none."""
    monkeypatch.setenv("KIT_CACHE", str(tmp_path))
    monkeypatch.setenv("KIT_IPU_LOAD_TIMEOUT_S", "1000")

    def limit(name: str, kind: str = "ipu") -> int:
        return next(j for j in jobs_for("quick", kind) if j.name == name).timeout_s

    assert limit("resnet50-torch-fp32_FP16") == 900 + 2 * 1000  # batches 4 and 32
    assert limit("bert-torch-fp32_FP16") == 900 + 1000  # packed: one compilation, at the pack batch
    assert limit("resnet50-torch-fp32_FP16", "cpu") == 900
    (tmp_path / "popef").mkdir()
    (
        tmp_path / "popef" / "resnet50-torch-fp32-0123456789ab-fp16-bs4-feedfacefeedface.popef"
    ).write_bytes(b"")
    assert limit("resnet50-torch-fp32_FP16") == 900 + 1000
    (
        tmp_path / "popef" / "resnet50-torch-fp32-0123456789ab-fp8-bs32-feedfacefeedface.popef"
    ).write_bytes(b"")
    # another precision's PopEF is not this row's
    assert limit("resnet50-torch-fp32_FP16") == 900 + 1000


def test_jobs_for_rejects_unknown_profiles_and_hardware():
    with pytest.raises(InvalidParameter, match="profile='huge'"):
        jobs_for("huge")
    with pytest.raises(InvalidParameter, match="hardware='tpu'"):
        jobs_for("quick", "tpu")


def test_full_profile_uses_the_published_ipu_batch_sizes_and_clients_only_on_an_ipu():
    ipu = {j.name: j.parameters for j in jobs_for("full", "ipu")}
    cpu = {j.name: j.parameters for j in jobs_for("full", "cpu")}
    assert ipu["resnet50-torch-fp32_FP16"]["batch_sizes"] == [4, 32]
    assert (
        ipu["resnet50-torch-fp32_FP16"]["clients"] == 4
        and cpu["resnet50-torch-fp32_FP16"]["clients"] == 1
    )


def test_c2_on_the_fake_backend(outputs, fake_backend):
    result = c2.run(
        dict(
            backend="fake",
            batch_sizes=[2, 4],
            small=True,
            warmup=1,
            min_duration_s=0.05,
            target_ci=0.0,
            min_count=3,
        )
    )
    assert result.status == "ok", result.errors
    assert [r["micro_batch"] for r in result.tables.to_dict()["c2"]] == [1, 2]
    assert len(fake_backend.sessions) == 4 and all(s.closed for s in fake_backend.sessions)


def test_server_study_on_the_fake_backend(outputs, fake_backend, tmp_path):
    result = server.run(
        dict(
            backend="fake",
            small=True,
            policies=[[1, 0.0]],
            min_duration_s=0.2,
            min_query_count=8,
            max_probes=2,
            fixed_batch_duration_s=0.05,
            sim_queries=300,
            sample_count=4,
            output_dir=str(tmp_path / "logs"),
        )
    )
    assert result.status == "ok", result.errors
    assert result.backend.device == "cpu" and result.backend.name == "fake"
    assert [r["batch_size"] for r in result.tables.to_dict()["fixed_batch"]] == [1]
    assert len(result.tables.to_dict()["best"]) == 1 and result.tables.to_dict()["probes"]
    assert result.tables.to_dict()["c2_prediction"] and all(s.closed for s in fake_backend.sessions)
    assert (tmp_path / "logs").is_dir()
    # its time account names its phases (it was all "other")
    account = result.tables.to_dict()["time_account"]
    phases = [(p["phase"], p["detail"]) for p in account["phases"]]
    assert [p for p, _ in phases] == ["export", "compile", "timing", "timing"], phases
    assert phases[2][1].startswith("the fixed-batch latency table")
    assert phases[3][1].startswith("LoadGen's search, policy") and "LoadGen runs" in phases[3][1]
    assert account["other_s"] < sum(p["seconds"] for p in account["phases"])


def test_scorecard_build_reads_results_and_names_the_part(outputs, fake_backend, tmp_path):
    # the published batch sizes
    result = model_benchmark.run({**FAST_MODEL, "batch_sizes": [4, 32]})
    path = result.write(tmp_path / "r.json")
    card = scorecard.build([path, tmp_path / "missing.json"])
    qps = card[
        (card.study == "bytemlperf_c600")
        & (card.figure == "QPS")
        & (card.model == "resnet50-torch-fp32")
        & (card.precision == "FP16")
    ].iloc[0]
    assert (
        qps.verdict == "not comparable"
        and qps.batch_size == "32"
        and qps.measured == pytest.approx(RunResult.read(path).measurements[1].qps_bytemlperf)
    )
    assert qps.published_hardware == published.study_hardware("bytemlperf_c600")
    c2_card = card[card.study == "c2_qwant"]
    assert set(c2_card.verdict) == {"not measured"} and "Mk1" in c2_card.iloc[0].published_hardware
    assert sum(scorecard.summary_counts(card).values()) == len(card)


def test_published_figures_come_from_one_source():
    """Bug (issue 11): C2 figures and hardware strings were typed in report.py and scorecard.py."""
    import inspect

    from kit.publish.report import plots, provenance, tables
    from kit.publish.report import server as server_report

    for module in (plots, provenance, tables, server_report, scorecard, server):
        source = inspect.getsource(module)
        assert "2526.35" not in source and "1.36" not in source
        assert "Graphcore C600 (IPU" not in source and "2 x GC2" not in source
    assert published.c2_latency_ms()[2] == 1.36 and published.c2_ipus() == 2
    assert set(published.pack_mode_models()) == {
        "albert-torch-fp32",
        "bert-torch-fp32",
        "roberta-torch-fp32",
        "deberta-torch-fp32",
    }


def test_result_kinds_round_trip_as_plain_strings(tmp_path):
    result = RunResult.new(ResultKind.C2_STUDY, "c2_study", {}, capture())
    text = result.write(tmp_path / "x.json").read_text()
    assert '"kind": "c2_study"' in text
    assert RunResult.read(tmp_path / "x.json").kind is ResultKind.C2_STUDY
    assert not list(tmp_path.glob("*.tmp"))  # the atomic write leaves nothing behind


def test_interactive_results_path_is_new_per_run_and_named_by_time(outputs):
    from kit.notebook import results_path

    first, second = results_path("", "c2_study"), results_path("", "c2_study")
    assert first.parent == outputs / "interactive" and first != second
    assert first.name.startswith("c2_study-20") and first.suffix == ".json"
    assert results_path("x/y.json", "c2_study") == Path("x/y.json")


def indexed(result, outputs, job_seconds: float = 1.0) -> str:
    """The index page of one job whose result is `result` (written under outputs/runs/r1/)."""
    from kit.publish.site import write_index

    run = outputs / "runs" / "r1"
    result.write(run / "m.json")
    (run / "m.html").write_text("<p>report</p>")
    record = {
        "name": "m",
        "status": "ok",
        "duration_s": job_seconds,
        "html": "runs/r1/m.html",
        "results": "runs/r1/m.json",
        "run_id": "r1",
    }
    return write_index([record], outputs).read_text()


def test_every_result_records_its_peak_memory_and_the_index_shows_it(outputs, fake_backend):
    """Issue 18: peak memory recorded for every job, shown in the index beside the duration."""

    result = model_benchmark.run({**FAST_MODEL, "batch_sizes": [1]})
    assert result.resources.peak_rss_bytes > 50e6 and "VmHWM" in result.resources.method
    page = indexed(result, outputs)
    assert (
        "<th>Peak memory</th>" in page and f"{result.resources.peak_rss_bytes / 1e9:.1f} GB" in page
    )


def test_the_numerics_call_is_the_timed_sessions_warm_up():
    """At batch 40 a BERT call takes seconds on 2 cores: the numerics check's call on the timed
    session warms it, so the timed window does one warm-up call fewer (never fewer than none)."""
    from kit.measure.window import MeasureConfig

    cfg = MeasureConfig(warmup=2, min_duration_s=0.1, min_count=3)
    assert model_benchmark.warmed_by_numerics(cfg, True).warmup == 1
    assert model_benchmark.warmed_by_numerics(cfg, False).warmup == 2
    assert (
        model_benchmark.warmed_by_numerics(MeasureConfig(warmup=0, min_duration_s=0.1), True).warmup
        == 0
    )


def test_every_study_is_a_result_kind_with_a_notebook_a_time_floor_and_a_method():
    """A study is named once (ResultKind): its notebook, the plan's time floor and the report's
    method are keyed by it, so adding a study without them fails here."""
    for name in STUDIES.names():
        kind = ResultKind(name)
        assert (notebooks_dir() / kind.notebook).exists(), kind.notebook
        assert kind.notebook in FLOORS and kind in METHODS, name
    for kind in ResultKind:
        assert (notebooks_dir() / kind.notebook).exists(), kind.notebook
    assert {j.notebook for j in jobs_for("quick", "cpu")} == {k.notebook for k in ResultKind}
