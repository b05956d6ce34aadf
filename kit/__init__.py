"""ipu-repro: reproduce published Graphcore IPU inference benchmarks on the hardware at hand."""

import os

__version__ = "0.1.0"

# OpenMP threads that busy-wait between parallel regions made torch 3-4x slower on shared cores
# (measured: resnet50 fp32 1.8 vs 6.1 img/s). It must be set before torch is imported; sessions
# record the value in their description. An explicit setting by the user wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
