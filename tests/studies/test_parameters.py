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


NOTEBOOK_OF_STUDY = {
    "model_benchmark": "model_benchmark.ipynb",
    "c2_study": "c2_study.ipynb",
    "server_scenario": "server_scenario.ipynb",
}


def notebook_defaults(path) -> dict:
    """The plain values of a notebook's papermill `parameters` cell, as Python reads them."""
    import ast
    import json

    cells = json.loads(path.read_text())["cells"]
    source = next(
        "".join(c["source"]) for c in cells if "parameters" in c["metadata"].get("tags", [])
    )
    return {
        node.targets[0].id: ast.literal_eval(node.value)
        for node in ast.parse(source).body
        if isinstance(node, ast.Assign)
    }


def _plain(value):
    return [_plain(v) for v in value] if isinstance(value, tuple | list) else value


@pytest.mark.parametrize("study", sorted(NOTEBOOK_OF_STUDY))
def test_each_notebooks_parameter_defaults_are_its_configs(study):
    """The parameters cell hand-copies the Config's defaults (27 in model_benchmark): a default
    changed in one place and not the other would run the notebook differently from `kit`."""
    import dataclasses

    from kit.studies import STUDIES
    from tests.conftest import ROOT

    defaults = notebook_defaults(ROOT / "notebooks" / NOTEBOOK_OF_STUDY[study])
    fields = {f.name: f for f in dataclasses.fields(STUDIES.get(study).config)}
    unknown = sorted(set(defaults) - set(fields) - {"results_path"})
    assert not unknown, f"{study}: notebook parameters the Config does not have: {unknown}"
    for name, value in defaults.items():
        if name == "results_path":
            continue
        f = fields[name]
        config_default = f.default_factory() if f.default is dataclasses.MISSING else f.default
        assert _plain(value) == _plain(config_default), (
            f"{study}.{name}: notebook {value!r}, Config {config_default!r}"
        )
