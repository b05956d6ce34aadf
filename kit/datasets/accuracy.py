"""The accuracy check of one model on its published dataset, with an honest status.

Status is "measured" only for real weights on the real data; "not comparable: <step>" when a step
of ByteMLPerf's evaluation cannot be reproduced for this model (never a verdict then); with random
weights the figure is still computed (it exercises the whole path) but marked "not meaningful:
random weights"; without the data (or the model's tokenizer, or a reference run for Mean Diff)
nothing is run and the status says what is missing and where to put it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kit.datasets.base import Dataset, NotComparable
from kit.datasets.metrics import validate_data_percent
from kit.datasets.registry import DATASETS
from kit.errors import InvalidParameter, MissingResource
from kit.models import get_entry
from kit.models.spec import ExportedModel, InputSpec, WeightsInfo
from kit.paths import datasets_dir, weights_dir
from kit.registry import Registry
from kit.results.reasons import ReasonCode
from kit.results.windows import AccuracyCheck

MEASURED = "measured"
RANDOM = "not meaningful: random weights"


@dataclass(frozen=True)
class ModelEval:
    """How one zoo model is evaluated: its dataset, adapter options and input names by role."""

    dataset: str
    options: dict = field(default_factory=dict)
    input_names: dict = field(default_factory=dict)
    tokenizer: bool = False


MODEL_EVALS: Registry[ModelEval] = Registry("model with a published accuracy")
_TORCH_SQUAD = {"ids": "input_ids.1", "mask": "attention_mask.1", "segment": "token_type_ids.1"}
for _m in ("albert-torch-fp32", "bert-torch-fp32", "deberta-torch-fp32"):
    MODEL_EVALS.register(_m, ModelEval("squad", {}, _TORCH_SQUAD, tokenizer=True))
MODEL_EVALS.register(
    "roberta-torch-fp32", ModelEval("squad", {"zero_segments": True}, _TORCH_SQUAD, tokenizer=True)
)
MODEL_EVALS.register(
    "bert-tf-fp32",
    ModelEval(
        "squad",
        {"dtype": "int32"},
        {"ids": "input_ids:0", "mask": "input_mask:0", "segment": "segment_ids:0"},
        tokenizer=True,
    ),
)
MODEL_EVALS.register(
    "resnet50-torch-fp32", ModelEval("imagenet", {"crop": 224}, {"image": "input_1.1"})
)
MODEL_EVALS.register(
    "resnet50-tf-fp32",
    ModelEval("imagenet", {"protocol": "vgg", "crop": 224}, {"image": "input_tensor:0"}),
)
MODEL_EVALS.register(
    "swin-large-torch-fp32", ModelEval("imagenet", {"crop": 384}, {"image": "pixel_values.1"})
)
MODEL_EVALS.register("widedeep-tf-fp32", ModelEval("criteo"))
MODEL_EVALS.register("roformer-tf-fp32", ModelEval("cail2019", {}, {}, tokenizer=True))
MODEL_EVALS.register("videobert-onnx-fp32", ModelEval("cifar100", {}, {}, tokenizer=True))
MODEL_EVALS.register("clip-onnx-fp32", ModelEval("fake_dataset"))
MODEL_EVALS.register("conformer-encoder-onnx-fp32", ModelEval("fake_dataset"))


def _stem(name: str) -> str:
    return re.sub(r"(:\d+|\.\d+)$", "", name)


def align_inputs(
    inputs: dict[str, np.ndarray], specs: tuple[InputSpec, ...]
) -> dict[str, np.ndarray]:
    """Rename inputs to the model's own names (ByteMLPerf's `input_ids.1` feeds an ONNX `input_ids`)
    and cast them to its dtypes; names that match neither way are an error."""
    by_stem = {_stem(k): v for k, v in inputs.items()}
    out = {}
    for spec in specs:
        value = inputs.get(spec.name, by_stem.get(_stem(spec.name)))
        if value is None:
            raise InvalidParameter(
                "model input", spec.name, f"one of the dataset's inputs {sorted(inputs)}"
            )
        out[spec.name] = np.asarray(value).astype(spec.dtype, copy=False)
    return out


def _result(
    model_name: str,
    ev: ModelEval | None,
    status: str,
    data_percent: float,
    weights: WeightsInfo | None,
    code: ReasonCode | None,
    **extra,
) -> AccuracyCheck:
    """The check's record; `code` says why it was not measured (None where it was)."""
    return AccuracyCheck.from_dict(
        {
            "model": model_name,
            "dataset": ev.dataset if ev else None,
            "metric": extra.pop("metric", None),
            "value": extra.pop("value", None),
            "status": status,
            "reason_code": None if code is None else str(code),
            "data_percent": data_percent,
            "weights": weights.to_dict() if weights else None,
            "details": extra,
        }
    )


def build_dataset(
    model_name: str,
    dataset_dir: Path | str | None = None,
    tokenizer_dir: Path | str | None = None,
    model: ExportedModel | None = None,
) -> Dataset:
    """The adapter for `model_name`, configured as the published run fed it."""
    ev = MODEL_EVALS.get(model_name)
    cls = DATASETS.get(ev.dataset)
    options = dict(ev.options)
    if ev.tokenizer:
        options["tokenizer_dir"] = Path(tokenizer_dir) if tokenizer_dir else weights_dir(model_name)
    if cls.generated_from_specs:
        options["specs"] = get_entry(model_name).inputs if model is None else model.inputs
    root = Path(dataset_dir) if dataset_dir else datasets_dir() / ev.dataset
    return cls(root, ev.input_names or None, **options)


def _run_fn(session, model: ExportedModel | None):
    if model is None:
        return lambda inputs: session.run(inputs)
    return lambda inputs: session.run(align_inputs(inputs, model.inputs))


class _Unmeasured(Exception):
    """Why a check ran nothing, or stopped: its status line and reason code."""

    def __init__(self, status: str, code: ReasonCode):
        super().__init__(status)
        self.status, self.code = status, code


def _score(dataset: Dataset, run, batch_size: int, data_percent: float, reference_run) -> dict:
    """The dataset's scored run; _Unmeasured where the data, a resource or the reference lacks."""
    problem = dataset.missing(dataset.root)
    if problem:
        raise _Unmeasured(
            f"not measured: no dataset ({problem} in {dataset.root}; expected {dataset.layout}; "
            f"see docs/datasets.md or `kit fetch-data {dataset.name}`)",
            ReasonCode.NO_DATASET,
        )
    try:
        if not dataset.needs_reference:
            return dataset.evaluate(run, batch_size, data_percent)
        if reference_run is None:
            raise _Unmeasured(
                "not measured: no reference session (Mean Diff compares with the fp32 CPU run)",
                ReasonCode.NO_REFERENCE,
            )
        return dataset.evaluate(  # type: ignore[call-arg]  # FakeDataset's
            run, batch_size, data_percent, reference=reference_run
        )
    except NotComparable as exc:
        raise _Unmeasured(str(exc), ReasonCode.OTHER) from exc
    except MissingResource as exc:  # the tokenizer, class names or similar
        raise _Unmeasured(f"not measured: {exc}", ReasonCode.OTHER) from exc


def evaluate_accuracy(
    model_name: str,
    session,
    dataset_dir: Path | str | None = None,
    data_percent: float = 100,
    weights: WeightsInfo | None = None,
    *,
    batch_size: int = 1,
    model: ExportedModel | None = None,
    reference_session=None,
    tokenizer_dir: Path | str | None = None,
) -> AccuracyCheck:
    """Run `session` (kit.backends Session) over the model's published dataset.

    Returns its AccuracyCheck (kit.results): model, dataset, metric, value, status, reason code,
    data_percent, weights, details. `model` (the ExportedModel) lets inputs be renamed/cast to the
    ONNX names; `reference_session` is the fp32 CPU run that Mean Diff (CLIP, Conformer) compares
    against.
    """
    data_percent = validate_data_percent(data_percent)
    weights = weights or (model.weights if model is not None else None)
    if weights is None:
        raise InvalidParameter("weights", None, "the WeightsInfo of the weights the session runs")
    if model_name not in MODEL_EVALS:
        return _result(
            model_name,
            None,
            "not measured: no published accuracy dataset for this model",
            data_percent,
            weights,
            ReasonCode.NO_ACCURACY_DATASET,
        )
    ev = MODEL_EVALS.get(model_name)
    dataset = build_dataset(model_name, dataset_dir, tokenizer_dir, model)
    reference = None if reference_session is None else _run_fn(reference_session, model)
    try:
        scored = _score(dataset, _run_fn(session, model), batch_size, data_percent, reference)
    except _Unmeasured as why:
        return _result(
            model_name, ev, why.status, data_percent, weights, why.code, metric=dataset.metric
        )
    status, code = (RANDOM, ReasonCode.RANDOM_WEIGHTS) if weights.is_random else (MEASURED, None)
    return _result(
        model_name,
        ev,
        status,
        data_percent,
        weights,
        code,
        batch_size=batch_size,
        dataset_dir=str(dataset.root),
        **scored,
    )
