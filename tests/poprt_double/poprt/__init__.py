"""A test double of Graphcore's `poprt` package (PopRT), for running the kit's IPU path in CI.

It enforces the documented PopRT 1.4 Python API (keyword names, allowed values, option
attributes, I/O names/shapes/dtypes) and raises on misuse like the real package, but runs the
model with ONNX Runtime on the CPU. Nothing it measures says anything about an IPU.
"""

import os

from poprt import compiler, converter, runtime
from poprt.converter import Converter

# the release emulated (KIT_POPRT_DOUBLE_VERSION, default 1.4.0): the calls its docs give, no others
__version__ = os.environ.get("KIT_POPRT_DOUBLE_VERSION", "1.4.0") + "+kit.test.double"
__kit_test_double__ = True
__kit_test_double_note__ = "not run on an IPU: PopRT test double over ONNX Runtime"

__all__ = ["Converter", "compiler", "converter", "runtime", "__version__"]
