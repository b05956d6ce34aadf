"""A user's own ONNX file as an ExportedModel: input specs read from the file.

The first dimension of every input is taken as the batch axis when it is dynamic; any other dynamic
dimension must be given through `input_shapes` (shape at batch 1), else the error names it.
A file where no input has a dynamic first dimension has a fixed batch size: the first dimension
of its first input (inputs whose first dimension is that size are its batched inputs). It runs
only at that size (`ExportedModel.check_batch_size`), never at a size it cannot take.
"""

from __future__ import annotations

import mmap
from dataclasses import replace
from pathlib import Path

from kit.errors import CorruptModel, InvalidParameter, MissingResource
from kit.models.build import flops_or_none, graph_tensors
from kit.models.spec import DTYPES, ExportedModel, Framework, InputSpec, WeightsInfo

ONNX_DTYPES = {1: "float32", 10: "float16", 7: "int64", 6: "int32", 9: "bool"}
FLOAT_PRECISIONS = {1: "fp32", 10: "fp16", 16: "bf16"}  # ONNX elem_type -> the kit's precision name


def load_onnx_file(
    path: Path | str, input_shapes: dict[str, tuple[int, ...]] | None = None
) -> ExportedModel:
    """Read the inputs and outputs of `path`; `input_shapes` fixes dynamic dims (shape at batch
    1)."""
    import onnx

    path = Path(path)
    if not path.is_file():
        raise MissingResource(f"ONNX file {path} does not exist")
    try:
        proto = onnx.load(str(path), load_external_data=False)
        onnx.checker.check_model(proto)
    except Exception as exc:  # noqa: BLE001 - protobuf and the checker raise several types
        raise CorruptModel(f"{path} is not a valid ONNX model: {exc}") from exc
    given = dict(input_shapes or {})
    initializers = {i.name for i in proto.graph.initializer}
    graph_inputs = [v for v in proto.graph.input if v.name not in initializers]
    unknown = set(given) - {v.name for v in graph_inputs}
    if unknown:
        raise InvalidParameter(
            "input_shapes",
            sorted(unknown),
            f"names of inputs of {path.name}: {[v.name for v in graph_inputs]}",
        )
    specs = [input_spec(v, given.get(v.name)) for v in graph_inputs]
    fixed = None if any(s.batched for s in specs) else _fixed_batch(specs)
    if fixed is not None:
        specs = [
            replace(s, shape=(1, *s.shape[1:]), batched=True)
            if s.shape and s.shape[0] == fixed
            else s
            for s in specs
        ]
    missing = [f"{s.name} dim {i}" for s in specs for i, d in enumerate(s.shape) if d < 0]
    if missing:
        raise InvalidParameter(
            "input_shapes",
            input_shapes,
            f"{path.name} has dynamic dimensions besides the batch axis: {', '.join(missing)}; "
            "give input_shapes={name: shape at batch 1}",
        )
    per_sample, shared = _flops(path, tuple(specs))
    return ExportedModel(
        name=path.stem,
        onnx_path=path,
        inputs=tuple(specs),
        outputs=tuple(o.name for o in proto.graph.output),
        weights=WeightsInfo("local", f"user ONNX file {path}"),
        framework=Framework.ONNX,
        dynamic_batch=fixed is None,
        fixed_batch_size=fixed,
        flops_per_sample=per_sample,
        flops_shared_per_call=shared,
        precision=graph_precision(proto),
    )


_SOURCES: dict[tuple, tuple[Path, ...]] = {}  # (path, size, mtime) -> onnx_sources, per process


def onnx_sources(path: Path | str) -> tuple[Path, ...]:
    """The files an ONNX model's content is read from: the file, then each external data file its
    tensors name (a user's model over 2 GB keeps its weights there; the kit's exports are single
    files). What a cache keyed by the model's content must hash."""
    path = Path(path)
    st = path.stat()
    memo = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if memo not in _SOURCES:
        _SOURCES[memo] = (path, *external_data_files(path))
    return _SOURCES[memo]


def external_data_files(path: Path) -> list[Path]:
    """The external data files `path`'s tensors name, sorted; [] without reading the graph where
    the file holds no 'location' key (every external tensor has one)."""
    if path.stat().st_size == 0:
        return []
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        if data.find(b"location") < 0:
            return []
    import onnx

    proto = onnx.load(str(path), load_external_data=False)
    locations = {
        entry.value
        for tensor in graph_tensors(proto.graph)
        if tensor.data_location == onnx.TensorProto.EXTERNAL
        for entry in tensor.external_data
        if entry.key == "location"
    }
    return sorted(path.parent / location for location in locations)


def graph_precision(proto) -> str:
    """The float type holding most of the graph's weights ('fp32', 'fp16', 'bf16'); the float
    inputs' type for a graph without float weights; 'fp32' for one with neither."""
    counts: dict[str, int] = {}
    for tensor in proto.graph.initializer:
        if tensor.data_type in FLOAT_PRECISIONS:
            size = 1
            for d in tensor.dims:
                size *= d
            counts[FLOAT_PRECISIONS[tensor.data_type]] = (
                counts.get(FLOAT_PRECISIONS[tensor.data_type], 0) + size
            )
    if not counts:
        for value in proto.graph.input:
            elem = value.type.tensor_type.elem_type
            if elem in FLOAT_PRECISIONS:
                counts[FLOAT_PRECISIONS[elem]] = counts.get(FLOAT_PRECISIONS[elem], 0) + 1
    return max(counts, key=lambda p: counts[p]) if counts else "fp32"


def _fixed_batch(specs: list[InputSpec]) -> int | None:
    """The batch size of a file without a dynamic batch axis: its first input's first dimension."""
    first = next((s.shape[0] for s in specs if s.shape), None)
    return first if first is not None and first > 0 else None


def input_spec(value, given: tuple[int, ...] | None) -> InputSpec:
    """InputSpec at batch 1; -1 marks a dynamic dimension nobody gave a size for."""
    elem = value.type.tensor_type.elem_type
    if elem not in ONNX_DTYPES:
        raise InvalidParameter(f"dtype of input {value.name}", elem, f"one of {DTYPES}")
    dims = [
        d.dim_value if d.HasField("dim_value") else -1 for d in value.type.tensor_type.shape.dim
    ]
    batched = bool(dims) and dims[0] == -1
    if given is not None:
        given = tuple(int(x) for x in given)
        if len(given) != len(dims):
            raise InvalidParameter(
                f"input_shapes[{value.name!r}]", given, f"a shape of rank {len(dims)}"
            )
        check_fixed_dims(value.name, dims, given)
        shape = given
    else:
        shape = tuple(1 if batched and i == 0 else d for i, d in enumerate(dims))
    dtype = ONNX_DTYPES[elem]
    high = 2 if dtype.startswith("int") else 1.0  # ids 0/1: valid for any vocabulary or mask
    return InputSpec(value.name, shape, dtype, batched=batched, high=high)


def check_fixed_dims(name: str, dims: list[int], given: tuple[int, ...]) -> None:
    """Refuse a given shape that contradicts a dimension the file fixes (ONNX Runtime would fail
    later, naming neither the input nor the value given)."""
    wrong = [
        f"dim {i} is {d} in the file, not {g}"
        for i, (d, g) in enumerate(zip(dims, given, strict=True))
        if d >= 0 and g != d
    ]
    if wrong:
        raise InvalidParameter(
            f"input_shapes[{name!r}]",
            given,
            f"input {name}: {'; '.join(wrong)}; give the file's size at every fixed "
            f"dimension: ({', '.join('?' if d < 0 else str(d) for d in dims)})",
        )


def _flops(path: Path, inputs: tuple[InputSpec, ...]) -> tuple[float | None, float]:
    return flops_or_none(path, inputs)
