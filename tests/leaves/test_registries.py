"""Every registered backend and dataset adapter, in the style of timm's registry tests.
(Every zoo entry is covered in tests/models/test_models.py; every study in
tests/studies/test_studies.py.)"""

import pytest

from kit.backends import BACKENDS, BackendConfig, get_backend
from kit.datasets.registry import DATASETS
from kit.errors import InvalidParameter, MissingResource


@pytest.mark.parametrize("name", BACKENDS.names())
def test_every_backend_says_whether_it_runs_here_in_one_line(name):
    backend = get_backend(name)
    assert backend.name == name
    reason = backend.availability()
    assert reason is None or ("\n" not in reason and "unavailable" in reason)
    if reason is None:
        info = backend.device_info(BackendConfig())
        assert info["kind"] in ("cpu", "gpu", "ipu") and info["name"]


@pytest.mark.parametrize("name", BACKENDS.names())
def test_every_backend_rejects_an_unknown_precision_naming_what_it_supports(name):
    backend = get_backend(name)
    with pytest.raises(InvalidParameter, match="precision"):
        backend.check_precision("fp4")
    assert "fp32" in backend.precisions


@pytest.mark.parametrize("name", DATASETS.names())
def test_every_dataset_adapter_names_its_metric_and_what_is_missing(name, tmp_path):
    cls = DATASETS.get(name)
    assert cls.name == name and cls.metric
    if name == "fake_dataset":  # generated from the model's input specs, never missing
        return
    dataset = cls(tmp_path / "empty")
    assert dataset.missing(dataset.root)
    with pytest.raises(
        MissingResource, match=rf"^{name}: .* in {tmp_path / 'empty'} \(expected layout"
    ):
        dataset.require()
