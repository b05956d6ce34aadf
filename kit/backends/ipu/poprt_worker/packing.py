"""Pack mode's helpers: PopRT's two async spellings, the outputs as ByteMLPerf sizes them, and the
sample lengths of ByteMLPerf's benchmark_pack."""

import numpy as np


def execute_async(runner, feeds, outputs):
    """PopRT 1.3 and later spell it execute_async; 1.1 / 1.2 (and ByteMLPerf) executeAsync."""
    for name in ("execute_async", "executeAsync"):
        method = getattr(runner, name, None)
        if method is not None:
            return method(feeds, outputs)
    raise AttributeError("this PopRT Runner has neither execute_async nor executeAsync")


def model_inputs(runner):
    """The compiled model's inputs as ByteMLPerf reads them (get_model_inputs): a PackRunner's
    get_execute_inputs describes one call's sample, not the compiled batch; else the newer name."""
    method = getattr(runner, "get_model_inputs", None) or runner.get_execute_inputs
    return method()


def model_outputs(runner):
    """The model's outputs as ByteMLPerf sizes pack buffers (get_model_outputs), else the newer name."""
    method = getattr(runner, "get_model_outputs", None) or runner.get_execute_outputs
    return method()


def length_pmf(avg, sd, top):
    """P(length = k) for k = 1..top, length = clip(int(x), 1, top), x ~ normal(avg, sd): the
    population benchmark_pack draws its samples' lengths from (int() truncates toward zero)."""
    import math

    def cdf(x):
        return 0.5 * (1.0 + math.erf((x - avg) / (sd * math.sqrt(2.0))))

    edges = [cdf(float(k)) for k in range(2, top + 1)]  # int(x) <= 1 (x < 2) is length 1; >= top is top
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
    """
    by_name = {s["name"]: s for s in specs}
    fill = {}
    for name in names:
        spec = by_name.get(name, {})
        low, high = spec.get("low"), spec.get("high")
        inside = (low is None or low <= 1) and (high is None or 1 < high)
        fill[name] = 1 if inside else int(low or 0)
    return fill
