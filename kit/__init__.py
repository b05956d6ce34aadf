"""ipu-repro: reproduce published Graphcore IPU inference benchmarks on the hardware at hand."""

__version__ = "0.1.0"
