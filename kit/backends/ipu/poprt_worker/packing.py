"""Pack mode's helpers: PopRT's two async spellings, one sample's output buffers from the calls each
PopRT release documents, and the sample lengths of ByteMLPerf's benchmark_pack."""

import numpy as np


def execute_async(runner, feeds, outputs):
    """PopRT 1.3 and later spell it execute_async; 1.1 / 1.2 (and ByteMLPerf) executeAsync."""
    for name in ("execute_async", "executeAsync"):
        method = getattr(runner, name, None)
        if method is not None:
            return method(feeds, outputs)
    raise AttributeError("this PopRT Runner has neither execute_async nor executeAsync")


MODEL_IO_UNTIL = (1, 3)  # Runner.get_model_inputs / get_model_outputs: PopRT 1.1 and 1.2's examples
MODEL_IO_CALLS = (
    "Runner.get_model_outputs (PopRT 1.1 / 1.2: the compiled batch), one sample's share"
)
EXECUTE_IO_CALLS = (
    "Runner.get_execute_outputs (PopRT 1.3 and later: one execute call's, one sample; "
    "get_model_inputs is documented only on LightRunner, where it lists the weights too)"
)


def sample_output_specs(runner, release, batch):
    """[(name, shape, dtype)] of one sample's output buffers for a PackRunner and how they were
    read, by the calls PopRT documents for `release`."""
    if release < MODEL_IO_UNTIL:
        specs = [
            (o.name, sample_share(o.shape, batch), o.numpy_data_type())
            for o in runner.get_model_outputs()
        ]
        return specs, MODEL_IO_CALLS
    return [
        (o.name, list(o.shape), o.numpy_data_type()) for o in runner.get_execute_outputs()
    ], EXECUTE_IO_CALLS


def sample_share(shape, batch):
    """One sample's share of an output of the compiled batch: dim 0 of `batch` becomes 1, and a 1-D
    output of batch x n values gives n values (setting its dim 0 to 1 would leave one value).

    >>> sample_share([20, 384, 2], 20), sample_share([20 * 384], 20), sample_share([20], 20)
    ([1, 384, 2], [384], [1])
    """
    shape = [int(d) for d in shape]
    size = int(np.prod(shape)) if shape else 1
    if not shape or size % batch:
        raise ValueError(f"a pack output of shape {shape} does not split into {batch} samples")
    if len(shape) > 1 and shape[0] == batch:
        return [1] + shape[1:]
    return [size // batch]


def length_pmf(avg, sd, top):
    """P(length = k) for k = 1..top, length = clip(int(x), 1, top), x ~ normal(avg, sd): the
    population benchmark_pack draws its samples' lengths from (int() truncates toward zero)."""
    import math

    def cdf(x):
        return 0.5 * (1.0 + math.erf((x - avg) / (sd * math.sqrt(2.0))))

    # int(x) <= 1 (x < 2) is length 1; >= top is top
    edges = [cdf(float(k)) for k in range(2, top + 1)]
    pmf = np.diff(np.array([0.0] + edges + [1.0]))
    return pmf


def population_mean(avg, sd, top):
    pmf = length_pmf(avg, sd, top)
    return float(np.dot(np.arange(1, top + 1), pmf))


def pack_lengths(rng, avg, top, count):
    """`count` lengths from benchmark_pack's population, stratified (one uniform draw in each of
    `count` equal slices of probability, then shuffled): each is a draw from the population, and
    their mean is the population's to well within 1 % (independent draws, as ByteMLPerf's, miss it
    by about 1 % at 4000 samples)."""
    cum = np.cumsum(length_pmf(avg, avg, top))
    u = (np.arange(count) + rng.uniform(size=count)) / count
    lengths = np.minimum(np.searchsorted(cum, u * cum[-1], side="right") + 1, top).astype(np.int32)
    rng.shuffle(lengths)
    return lengths


def pack_fill(specs, names):
    """The value each pack input's timing samples hold: 1, as benchmark_pack's all-ones arrays,
    except where 1 is outside the input's valid range (RoBERTa's single token type): its lowest
    valid value there. Ones index past a one-row embedding table, which the IPU's gather does not
    check and ONNX Runtime (the test double) refuses; the timing does not depend on the value.

    >>> pack_fill([{"name": "types", "low": 0, "high": 1}, {"name": "ids", "low": 0, "high": 99}], ["types", "ids"])
    {'types': 0, 'ids': 1}
    """  # noqa: E501
    by_name = {s["name"]: s for s in specs}
    fill = {}
    for name in names:
        spec = by_name.get(name, {})
        low, high = spec.get("low"), spec.get("high")
        inside = (low is None or low <= 1) and (high is None or 1 < high)
        fill[name] = 1 if inside else int(low or 0)
    return fill
