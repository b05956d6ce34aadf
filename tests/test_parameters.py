"""Issue 14 #12: a bad parameter is one clear error naming it, before anything runs."""

import pytest

from kit.errors import InvalidParameter
from kit.studies import model_benchmark

BAD = [
    ({"min_duration_s": float("nan")}, "min_duration_s=nan"),
    ({"min_duration_s": float("inf")}, "min_duration_s=inf"),
    ({"batch_sizes": "abc"}, "batch_sizes='abc': a list of integers"),
    ({"batch_sizes": [1, "x"]}, "batch_sizes='x': an integer"),
    ({"warmup": "5"}, "warmup='5': an integer"),
    ({"clients": 1.5}, "clients=1.5: an integer"),
    ({"small": "yes"}, "small='yes': True or False"),
    ({"weights": 3}, "weights=3: a string"),
    ({"data_percent": float("nan")}, "data_percent=nan"),
    ({"data_percent": 0}, "data_percent=0.0: a number in (0, 100]"),
    ({"data_percent": 150}, "data_percent=150.0"),
    ({"input_shapes": "x"}, "input_shapes='x': a dict"),
]


@pytest.mark.parametrize("params, message", BAD, ids=[str(p) for p, _ in BAD])
def test_bad_parameter_is_named(params, message):
    with pytest.raises(InvalidParameter) as err:
        model_benchmark.Config(**params)
    assert message in str(err.value)
    result = model_benchmark.run(params)  # the notebook path: an error in the result, nothing run
    assert result.status == "error" and message in result.errors[0] and not result.measurements


def test_unknown_parameter_names_only_itself():
    result = model_benchmark.run({"bogus": 1, "model": "resnet50-torch-fp32"})
    assert result.status == "error" and "parameters=['bogus']" in result.errors[0]
