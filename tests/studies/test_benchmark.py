import warnings

import pytest

from kit.errors import InvalidParameter
from kit.results import SECTIONS, RunResult, SectionAsDict
from kit.results.values import Record
from kit.studies.model_benchmark import Config as ModelBenchmarkConfig
from kit.studies.model_benchmark import run as run_model_benchmark

FAST = dict(
    model="resnet50-torch-fp32",
    small=True,
    batch_sizes=[1, 2],
    warmup=1,
    min_duration_s=0.05,
    min_count=3,
    target_ci=0.0,
)


def test_small_resnet50_end_to_end(outputs, tmp_path):
    with warnings.catch_warnings():
        # a study that assigns a section a dict fails here
        warnings.simplefilter("error", SectionAsDict)
        result = run_model_benchmark(FAST)
    assert result.status == "ok", result.errors
    for name, record in SECTIONS.items():  # a study that appends a dict to a section fails here
        value = getattr(result, name)
        assert (
            all(isinstance(v, record) for v in value)
            if isinstance(value, list)
            else isinstance(value, record)
        )
    # a study that writes a table the record does not name, or rows that are not its records,
    # fails here
    assert result.tables.more == {} and result.tables.time_account.phases
    for name in ("peaks", "roofline", "failed_batches", "search", "search_by_batch"):
        assert all(isinstance(row, Record) for row in getattr(result.tables, name)), name
    assert result.tables.peaks and result.tables.roofline
    assert result.numerics and result.accuracy and result.measurements
    assert [m.batch_size for m in result.measurements] == [1, 2]
    for m in result.measurements:
        assert m.latency.count >= 3 and m.throughput > 0
        assert len(m.call_times()[0]) == m.latency.count  # raw samples kept
    assert result.numerics[0].max_abs == pytest.approx(0.0, abs=1e-6)
    assert result.model.weights.source == "random"
    assert result.backend.device_info.kind == "cpu"
    again = RunResult.read(result.write(tmp_path / "r.json"))
    assert again.measurements[0].latency == result.measurements[0].latency


@pytest.mark.parametrize(
    "override, message",
    [
        ({"model": "resnet-9000"}, "unknown model 'resnet-9000'; known: "),
        ({"backend": "abacus"}, "unknown backend 'abacus'; known: "),
        ({"batch_sizes": [0]}, "invalid batch_size=0"),
        ({"batch_sizes": [2.5]}, "invalid batch_sizes=2.5: an integer"),
        ({"batch_sizes": "abc"}, "invalid batch_sizes='abc': a list of integers"),
        ({"min_duration_s": float("nan")}, "invalid min_duration_s=nan: a finite number"),
        ({"min_duration_s": "fast"}, "invalid min_duration_s='fast': a number"),
        ({"accuracy": "yes"}, "invalid accuracy='yes': True or False"),
        ({"device": "tpu"}, "invalid device='tpu'"),
        ({"precision": "fp4"}, "invalid precision='fp4'"),
        ({"published_precision": "INT4"}, "invalid published_precision='INT4'"),
        ({"colour": "blue"}, "invalid parameters=['colour']"),
    ],
)
def test_bad_parameters_become_one_line_errors(outputs, override, message):
    result = run_model_benchmark({**FAST, **override})
    assert result.status == "error"
    assert len(result.errors) == 1 and message in result.errors[0]
    assert "\n" not in result.errors[0]


def test_config_validates_on_creation():
    with pytest.raises(InvalidParameter):
        ModelBenchmarkConfig(batch_sizes=[])
