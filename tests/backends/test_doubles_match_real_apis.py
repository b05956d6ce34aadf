"""The GPU doubles stand in for the real libraries only where they accept exactly what the real ones
accept: every method a double offers exists in the installed library with the same parameters in
the same places (a call the double takes, the real library takes), so code tested through a double
cannot call a name or a keyword that fails on a real GPU host. Checked against the libraries
installed here: ONNX Runtime's CPU build (its IOBinding and OrtValue classes are the GPU build's)
and torch's CPU build (torch.cuda's streams and graphs are importable without a GPU). TensorRT's
double (tests/tensorrt_double.py) is not checked this way: its module needs libnvinfer to import."""

from __future__ import annotations

import inspect

import onnxruntime as ort
import pytest
import torch

from tests import cuda_double
from tests.backends.test_onnxruntime_backend import FakeBinding, FakeGpuSession, FakeOrtValue

POSITIONAL_ONLY = inspect.Parameter.POSITIONAL_ONLY
KEYWORD_ONLY = inspect.Parameter.KEYWORD_ONLY
VARIADIC = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)


def parameters(fn) -> list[inspect.Parameter]:
    """`fn`'s parameters without the bound self or cls."""
    params = list(inspect.signature(fn).parameters.values())
    return params[1:] if params and params[0].name in ("self", "cls", "obj") else params


def call_mismatches(double, real) -> list[str]:
    """What the double accepts that the real callable does not: a parameter missing, moved or
    renamed (a positional-only parameter of the real one must be positional-only in the double,
    whose name then does not matter), a required one the double lets a call leave out, a
    keyword-only one the double takes by position."""
    theirs = parameters(real)
    problems = missing_requirements(parameters(double), theirs)
    for i, p in enumerate(parameters(double)):
        if p.kind in VARIADIC:
            if not any(q.kind == p.kind for q in theirs):
                problems.append(f"the double takes {p} (anything), the real one does not")
        elif i >= len(theirs) or theirs[i].kind in VARIADIC:
            problems.append(f"parameter {i} '{p.name}' does not exist in the real one")
        elif theirs[i].kind == POSITIONAL_ONLY:
            if p.kind != POSITIONAL_ONLY:
                problems.append(
                    f"parameter {i} '{p.name}' may be given by name; the real one's is "
                    "positional-only"
                )
        elif p.name != theirs[i].name:
            problems.append(
                f"parameter {i} is '{p.name}' in the double, '{theirs[i].name}' in the real one"
            )
    return problems


def missing_requirements(
    mine: list[inspect.Parameter], theirs: list[inspect.Parameter]
) -> list[str]:
    """The real callable's required parameters that a call to the double may leave out, and its
    keyword-only ones the double takes by position."""
    by_name = {p.name: p for p in mine}
    problems = []
    for i, q in enumerate(theirs):
        if q.kind in VARIADIC:
            continue
        p = mine[i] if q.kind == POSITIONAL_ONLY and i < len(mine) else by_name.get(q.name)
        if q.default is inspect.Parameter.empty and (
            p is None or p.default is not inspect.Parameter.empty
        ):
            problems.append(
                f"the real one requires '{q.name}'; the double lets a call leave it out"
            )
        if q.kind == KEYWORD_ONLY and p is not None and p.kind != KEYWORD_ONLY:
            problems.append(
                f"'{q.name}' is keyword-only in the real one; the double takes it by position"
            )
    return problems


def public_methods(cls: type) -> list[str]:
    return sorted(
        name
        for name, value in vars(cls).items()
        if callable(value) or isinstance(value, classmethod | staticmethod)
        if not name.startswith("_")
    )


def test_a_renamed_keyword_in_a_double_is_caught():
    def real(self, name, device_type="cpu", device_id=0):
        pass

    def double(self, name, device="cpu"):
        pass

    def more(self, name, device_type="cpu", device_id=0, vendor=1):
        pass

    assert call_mismatches(double, real) == [
        "parameter 1 is 'device' in the double, 'device_type' in the real one"
    ]
    assert call_mismatches(more, real) == ["parameter 3 'vendor' does not exist in the real one"]
    assert call_mismatches(real, real) == []

    def required(self, name, device_type, device_id):
        pass

    def lenient(self, name, device_type="cpu"):
        pass

    def keyword_only(self, name, *, stream):
        pass

    def positional(self, name, stream=None):
        pass

    assert call_mismatches(lenient, required) == [
        "the real one requires 'device_type'; the double lets a call leave it out",
        "the real one requires 'device_id'; the double lets a call leave it out",
    ]
    assert call_mismatches(positional, keyword_only) == [
        "the real one requires 'stream'; the double lets a call leave it out",
        "'stream' is keyword-only in the real one; the double takes it by position",
    ]


@pytest.mark.parametrize(
    ("double", "real"),
    [
        (FakeOrtValue, ort.OrtValue),
        (FakeBinding, ort.IOBinding),
        (FakeGpuSession, ort.InferenceSession),
        (cuda_double.FakeStream, torch.cuda.Stream),
        (cuda_double.FakeGraph, torch.cuda.CUDAGraph),
    ],
)
def test_each_double_offers_only_the_real_methods_with_the_real_parameters(double, real):
    problems = {}
    for name in public_methods(double):
        if not hasattr(real, name):
            problems[name] = f"the real {real.__module__}.{real.__name__} has no {name}"
        elif found := call_mismatches(getattr(double, name), getattr(real, name)):
            problems[name] = found
    assert not problems, problems


def test_the_onnxruntime_double_session_is_constructed_as_the_real_one():
    assert call_mismatches(FakeGpuSession.__init__, ort.InferenceSession.__init__) == []


def test_what_the_cuda_double_replaces_in_torch_cuda_is_called_as_the_real_one(monkeypatch):
    real = {
        name: getattr(torch.cuda, name)
        for name in (
            "is_available",
            "synchronize",
            "Stream",
            "stream",
            "current_stream",
            "CUDAGraph",
            "graph",
            "empty_cache",
            "is_current_stream_capturing",
        )
    }
    cuda = cuda_double.install(monkeypatch)
    try:
        problems = {
            name: found
            for name, fn in real.items()
            if (found := call_mismatches(getattr(torch.cuda, name), fn))
        }
    finally:
        cuda_double.uninstall(cuda)
    assert not problems, problems


def documented_signature(fn) -> inspect.Signature:
    """A builtin's signature from the first line of its docstring ('tensor(data, *, dtype=None) ->
    Tensor'); a keyword-only parameter the line gives no default (as_tensor's device) defaults to
    None, as in torch's argument parser."""
    line = fn.__doc__.strip().splitlines()[0].split(" -> ")[0]
    params = line[line.index("(") + 1 : line.rindex(")")].split(", ")
    made = []
    for text in params:
        if text == "*":
            continue
        kind = (
            KEYWORD_ONLY
            if "*" in params and params.index(text) > params.index("*")
            else inspect.Parameter.POSITIONAL_OR_KEYWORD
        )
        name, _, default = text.partition("=")
        if not default and kind == KEYWORD_ONLY:
            default = "None"
        made.append(
            inspect.Parameter(
                name.split(":")[0].strip(),
                kind,
                default=inspect.Parameter.empty if not default else default.strip(),
            )
        )
    return inspect.Signature(made)


@pytest.mark.parametrize("name", ["tensor", "as_tensor"])
def test_what_the_cuda_double_replaces_in_torch_is_called_as_the_real_one(name, monkeypatch):
    """torch.tensor and torch.as_tensor are builtins: their documented signatures stand for them."""
    real = getattr(torch, name)
    cuda = cuda_double.install(monkeypatch)
    try:
        double = getattr(torch, name)
    finally:
        cuda_double.uninstall(cuda)
    stand_in = lambda: None  # noqa: E731 - a callable to hang the documented signature on
    stand_in.__signature__ = documented_signature(real)
    assert call_mismatches(double, stand_in) == []
