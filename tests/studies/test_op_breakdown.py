"""kit.studies.op_breakdown: the two factors of a figure's fraction of peak, from operator self
times."""

import pytest

from kit.results import ResultKind, RunResult
from kit.studies import op_breakdown
from kit.studies.model_benchmark import explain_below_peak


def test_fraction_of_peak_is_matrix_share_times_matrix_rate():
    # 1 GFLOP per call, 3 calls; 0.6 s of matrix ops and 0.4 s of others in all -> 5 GFLOP/s on
    # matrices
    times = {
        "aten::addmm": 400_000.0,
        "aten::bmm": 200_000.0,
        "aten::native_layer_norm": 300_000.0,
        "aten::gelu": 100_000.0,
    }
    b = op_breakdown.breakdown(times, flops_per_call=1e9, peak_gflops=10.0, calls=3)
    assert b["matrix_time_share"] == pytest.approx(0.6)
    assert b["matrix_gflops"] == pytest.approx(5.0) and b[
        "matrix_fraction_of_peak"
    ] == pytest.approx(0.5)
    assert [o["op"] for o in b["top_ops"]][:2] == ["aten::addmm", "aten::native_layer_norm"]
    text = op_breakdown.reason(b)
    assert "50% of the peak for 60% of the time" in text and "30% of the peak" in text
    assert "matrix operators' own rate" in text and "aten::native_layer_norm" in text
    with pytest.raises(ValueError, match="no operator time"):
        op_breakdown.breakdown({"aten::add": 5.0}, 1e9, 10.0)


def test_a_real_torch_profile_names_the_matrix_operators():
    import torch

    class Session:
        def run(self, inputs):
            return torch.nn.functional.layer_norm(inputs["a"] @ inputs["b"], (64,))

    times = op_breakdown.profile_torch_session(
        Session(), {"a": torch.randn(64, 64), "b": torch.randn(64, 64)}
    )
    assert any(op_breakdown.is_matrix_op(name) and t > 0 for name, t in times.items())
    assert any("layer_norm" in name for name in times)
    assert times[op_breakdown.OUTSIDE_OPS] >= 0 and not op_breakdown.is_matrix_op(
        op_breakdown.OUTSIDE_OPS
    )


def test_the_reason_goes_on_a_compute_bound_row_below_55_percent_only():
    result = RunResult(ResultKind.MODEL_BENCHMARK, "m", parameters={}, environment={})
    found = op_breakdown.breakdown({"aten::mm": 1.0, "aten::add": 1.0}, 1e9, 10.0, calls=1)
    result.tables = result.tables.with_table("op_breakdown", {"batch_size": 4, **found})
    result.tables = result.tables.with_table(
        "roofline",
        [
            {"batch_size": 4, "bound": "compute", "fraction_of_bound": 0.3},
            {"batch_size": 2, "bound": "compute", "fraction_of_bound": 0.3},
        ],
    )
    explain_below_peak(result)
    at4, at2 = result.tables.to_dict()["roofline"]
    assert (
        at4["matrix_time_share"] == pytest.approx(0.5) and "of the time" in at4["below_peak_reason"]
    )
    assert "below_peak_reason" not in at2  # measured at the largest batch only
    result.tables = result.tables.with_table(
        "roofline", [{"batch_size": 4, "bound": "compute", "fraction_of_bound": 0.6}]
    )
    explain_below_peak(result)
    assert "below_peak_reason" not in result.tables.to_dict()["roofline"][0]
