"""ByteMLPerf's fake dataset (CLIP, Conformer): seeded random inputs, scored by Mean Diff.

100 batches; batch i is drawn as ByteMLPerf's generator draws it after `np.random.seed(i)`
(numpy's legacy Mersenne-Twister stream, here a private `RandomState(i)`, the same numbers
without touching the global generator), input by input in the model's input order: integer
inputs (any dtype containing "int") `randint(0, 1000)` except those named like a mask or segment
(`randint(0, 2)`), floats `random() * 2 - 1`, booleans all False. The
figure is the mean absolute difference of all outputs against a reference run (ByteMLPerf: the
fp32 CPU result), with NaN/Inf set to 0 (`kit.measure.numerics.NumericDiff`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np

from kit.datasets.base import Batch, Dataset, RunFn
from kit.datasets.metrics import samples_for_percent
from kit.errors import InvalidParameter
from kit.measure.numerics import NumericDiff
from kit.models.spec import InputSpec, validate_batch_size

BATCHES = 100


def fake_array(spec: InputSpec, batch_size: int, rng: np.random.RandomState) -> np.ndarray:
    """One input as ByteMLPerf's `get_fake_samples_regular` draws it from `rng`."""
    shape = spec.shape_for(batch_size)
    if spec.dtype == "bool":
        return np.zeros(shape, dtype=bool)
    if "int" in spec.dtype:
        high = 2 if ("mask" in spec.name or "segment" in spec.name) else 1000
        return rng.randint(0, high, size=shape).astype(spec.dtype)
    return (rng.random_sample(shape) * 2 - 1).astype(spec.dtype)


class FakeDataset(Dataset):
    name = "fake_dataset"
    metric = "Mean Diff"
    layout = "nothing: generated from the model's input specs"
    generated_from_specs = True
    needs_reference = True

    def __init__(self, root=None, input_names=None, *, specs: tuple[InputSpec, ...] = ()):
        super().__init__(root, input_names)
        if not specs:
            raise InvalidParameter("specs", specs, "the model's InputSpecs")
        self.specs = tuple(specs)

    def __len__(self) -> int:
        return BATCHES

    def batches(self, batch_size: int, data_percent: float = 100) -> Iterator[Batch]:
        validate_batch_size(batch_size)
        for i in range(samples_for_percent(BATCHES, data_percent)):
            rng = np.random.RandomState(i)  # == np.random.seed(i), privately
            inputs = {s.name: fake_array(s, batch_size, rng) for s in self.specs}
            yield Batch(inputs, None, batch_size, batch_size, {"seed": i})

    def score(self, results: Iterable[tuple[Batch, list[np.ndarray]]]) -> dict:
        raise InvalidParameter(
            "reference", None, "a reference run: use evaluate(run, ..., reference=)"
        )

    def evaluate(
        self, run: RunFn, batch_size: int, data_percent: float = 100, reference: RunFn | None = None
    ) -> dict:
        if reference is None:
            return self.score(())
        n = total = sq = rel_total = 0.0
        worst = worst_rel = 0.0
        nan = inf = samples = 0
        for batch in self.batches(batch_size, data_percent):  # streamed: CLIP outputs are large
            d = NumericDiff.between(list(reference(batch.inputs)), list(run(batch.inputs)))
            n += d.elements
            total += d.mean_abs * d.elements
            sq += (d.std_abs**2 + d.mean_abs**2) * d.elements
            rel_total += d.mean_rel * d.elements
            worst, worst_rel = max(worst, d.max_abs), max(worst_rel, d.max_rel)
            nan, inf, samples = nan + d.nan_count, inf + d.inf_count, samples + batch.valid
        mean = total / n
        return {
            "metric": self.metric,
            "value": mean,
            "unit": "abs diff vs reference output",
            "samples": samples,
            "std_diff": float(np.sqrt(max(0.0, sq / n - mean**2))),
            "max_diff": worst,
            "mean_rel_diff": rel_total / n,
            "max_rel_diff": worst_rel,
            "nan_count": nan,
            "inf_count": inf,
        }
