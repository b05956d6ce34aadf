"""Double of `poprt.converter.Converter`: keyword-only options checked against PopRT 1.4's list."""

from __future__ import annotations

import onnx
from onnx import TensorProto, helper, version_converter

from poprt import passes

PRECISIONS = ("fp32", "fp16", "fp8")
FP8_FORMATS = ("F143", "F152")
FP8_OPS = ("Conv", "MatMul", "Gemm")

# Converter.__init__ keywords documented for PopRT 1.4.0 (python_api.html, poprt.Converter).
DEFAULTS = {
    "input_shape": None,
    "convert_version": 11,
    "precision": "fp32",
    "checkpoints": None,
    "eightbitsio": False,
    "fp16_skip_op_types": None,
    "skip_passes": None,
    "used_passes": [],
    "check": False,
    "disable_fast_norm": False,
    "pack_args": None,
    "fp8_skip_op_names": None,
    "fp8_params": "F143,F143,0,0",
    "quantize": False,
    "enable_insert_remap": False,
    "enable_erf_gelu": False,
    "serialize_matmul": None,
    "serialize_matmul_add": None,
    "merge_matmul": None,
    "merge_matmul_add": None,
    "merge_moe": None,
    "remap_mode": ["after_matmul"],
    "max_tensor_size": -1,
    "infer_shape_ahead": False,
    "enable_avoid_overflow_patterns": False,
    "disable_progress_bar": False,
    "batch_size": None,
    "batch_axis": None,
    "remove_outputs": [],
    "fold_periodic_initializer": False,
    "enable_compress_pattern": False,
    "merge_if_with_same_cond": False,
    "logger": None,
}


# The passes PopRT 1.4.0 registers (python_api.html, "This pass is registered as ..."). A name not
# here (e.g. ByteMLPerf's own `deberta_pack`) exists only once its module has registered it.
BUILTIN_PASSES = frozenset(
    """
add_checkpoints apply_host_concat_split apply_ir_pass attention_padding auto_insert_remap
batchnorm_workaround check_unsupported_attribute check_with_fake_data compress_pattern \
const_batch_size
const_input_shape constant_folding cumsum_workaround double_to_float eight_bits_io eliminate_deadend
eliminate_duplicate_initializer eliminate_identity eliminate_nop_arithmetic eliminate_nop_cast
eliminate_nop_expand eliminate_nop_flatten eliminate_nop_if eliminate_nop_pad eliminate_nop_reshape
eliminate_nop_transpose eliminate_unused_initializer erf_gelu_pattern \
extract_constant_to_initializer
fill_squeeze_axes final_check float_ops_workaround float_to_fp8 float_to_half float_to_int8
float_to_mixed fold_periodic_initializer fuse_bn_into_conv fuse_bn_into_gemm fuse_cast_into_onehot
fuse_consecutive_cast fuse_consecutive_reshape fuse_consecutive_squeeze fuse_consecutive_transpose
fuse_consecutive_unsqueeze fuse_mul_into_matmul fused_attention gelu_pattern indices_workaround
insert_attention_mask int64_to_int32 layer_norm_pattern layer_precision_compare manual_sharding
matmul_rotary_embedding merge_if_with_same_cond merge_matmul merge_matmul_add merge_moe \
merge_multi_slice
merge_variant_if model_overview move_subgraph_initializer onehot_workaround overlap_io \
packed_transformer
post_expand pre_scale remove_duplicated_initializer remove_empty_concat_inputs
remove_initializer_from_input remove_input_cast remove_outputs replace_bn_with_mul_add \
replace_castlike
replace_clip_empty_inputs replace_consecutive_cast_with_notzero replace_div_with_mul
replace_einsum_with_matmul replace_erf_with_erfv2 replace_gemm_with_matmul replace_greater_or_equal
replace_groupnorm_with_fast_norm replace_half_reducemean replace_hardswish replace_isinf
replace_less_or_equal replace_nonzero replace_pow replace_round replace_softmax replace_where_mask
replace_where_with_mul_add replace_where_with_wherev2 serialize_matmul serialize_matmul_add
shape_inference sort_graph topk_workaround trace_folding unique_name_for_nodes
""".split()
)


def parse_fp8_params(text):
    """'F143,F143,-3,-3' -> (input_format, weight_format, input_scale, weight_scale)."""
    parts = [p.strip() for p in str(text).split(",")]
    if len(parts) != 4 or parts[0] not in FP8_FORMATS or parts[1] not in FP8_FORMATS:
        raise ValueError(
            f"fp8_params must be 'input_format,weight_format,input_scale,weight_scale' "
            f"with formats in {FP8_FORMATS}, got {text!r}"
        )
    try:
        return parts[0], parts[1], int(parts[2]), int(parts[3])
    except ValueError:
        raise ValueError(f"fp8_params scales must be integers, got {text!r}") from None


def skip_pass_names(skip_passes):
    """PopRT documents `skip_passes (str)` (1.0.2-1.5.0; CLI `--skip_passes SKIP_PASSES`), names
    comma-separated as `--passes` takes them; a list is not what it takes.

    >>> skip_pass_names("eliminate_nop_cast, replace_div_with_mul")
    ['eliminate_nop_cast', 'replace_div_with_mul']
    """
    if skip_passes is None:
        return []
    if not isinstance(skip_passes, str):
        raise TypeError(
            f"skip_passes must be str (pass names, comma-separated), got "
            f"{type(skip_passes).__name__} {skip_passes!r}"
        )
    return [name.strip() for name in skip_passes.split(",") if name.strip()]


class Converter:
    """Convert a general ONNX model to an "IPU-friendly" one (here: fixed shapes, precision)."""

    def __init__(self, *args, **kwargs):
        if args:
            raise TypeError(f"Converter() takes 0 positional arguments but {len(args)} were given")
        unknown = sorted(set(kwargs) - set(DEFAULTS))
        if unknown:
            raise TypeError(f"__init__() got an unexpected keyword argument '{unknown[0]}'")
        opts = dict(DEFAULTS, **kwargs)
        if opts["precision"] not in PRECISIONS:
            raise ValueError(
                f"precision {opts['precision']!r} is not supported; use one of {PRECISIONS}"
            )
        if opts["input_shape"] is not None:
            shapes = opts["input_shape"]
            if not isinstance(shapes, dict) or not all(
                isinstance(k, str)
                and isinstance(v, (list, tuple))
                and v
                and all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in v)
                for k, v in shapes.items()
            ):
                raise TypeError(
                    f"input_shape must be Dict[str, List[int]] of positive dims, got {shapes!r}"
                )
        if not isinstance(opts["convert_version"], int):
            raise TypeError(f"convert_version must be int, got {opts['convert_version']!r}")
        if opts["precision"] == "fp8":
            self.fp8 = parse_fp8_params(opts["fp8_params"])
        self.skipped = skip_pass_names(opts["skip_passes"])
        if not isinstance(opts["used_passes"], (list, tuple)) or not all(
            isinstance(p, str) for p in opts["used_passes"]
        ):
            raise TypeError(f"used_passes must be List[str], got {opts['used_passes']!r}")
        unknown_passes = [
            p for p in [*opts["used_passes"], *self.skipped] if p not in BUILTIN_PASSES
        ]
        if unknown_passes:
            raise KeyError(
                f"pass {unknown_passes[0]!r} is not registered (register custom passes with "
                "poprt.passes.register before converting)"
            )
        if (opts["batch_size"] is None) != (opts["batch_axis"] is None):
            raise ValueError("batch_size and batch_axis must be given together")
        self.options = opts

    def convert(self, model):
        if not isinstance(model, onnx.ModelProto):
            raise TypeError(f"convert() expects an onnx.ModelProto, got {type(model).__name__}")
        model = self._convert_version(onnx.ModelProto.FromString(model.SerializeToString()))
        self._check_fp8_skips(model)
        self._fix_shapes(model)
        self._run_passes(model)
        self._int64_inputs_to_int32(model)
        precision = self.options["precision"]
        if precision in ("fp16", "fp8"):
            from onnxconverter_common import float16

            for node in model.graph.node:  # onnxconverter-common leaves Cast(to=float) as is
                if node.op_type == "Cast":
                    for attr in node.attribute:
                        if attr.name == "to" and attr.i == TensorProto.FLOAT:
                            attr.i = TensorProto.FLOAT16
            model = float16.convert_float_to_float16(
                model, keep_io_types=False, check_fp16_ready=False
            )
        emulated = {
            "fp32": "fp32",
            "fp16": "fp16",
            "fp8": "fp16 (the double has no fp8: Conv/MatMul/Gemm run in fp16)",
        }[precision]
        helper.set_model_props(
            model, {"poprt_double.precision": precision, "poprt_double.emulated_as": emulated}
        )
        return model

    def _run_passes(self, model):
        """PopRT's default passes the double emulates, unless skipped, then the used passes it
        emulates; a used pass it does not emulate changes nothing (as one that finds no pattern)."""
        skip = set(self.skipped)
        for name, rewrite in passes.DEFAULT_PASSES.items():
            if name not in skip:
                rewrite(model)
        for name in self.options["used_passes"] or []:
            if name in passes.USED_PASSES and name not in skip:
                passes.USED_PASSES[name](model)

    def _convert_version(self, model):
        """PopRT's first step: the graph brought to opset `convert_version` with ONNX's own version
        converter, which has no way down for some ops (LayerNormalization-17, Identity-16,
        Add-14...): such a graph fails here, before any pass, as it does on a C600."""
        target = self.options["convert_version"]
        try:
            return version_converter.convert_version(model, target)
        except Exception as exc:  # onnx raises RuntimeError / ValidationError from its C++ core
            opsets = {o.domain or "ai.onnx": o.version for o in model.opset_import}
            raise RuntimeError(
                f"cannot convert the model (opsets {opsets}) to opset {target} "
                f"(convert_version): {exc}"
            ) from None

    def _check_fp8_skips(self, model):
        """fp8_skip_op_names ('Conv_1,Conv_2') must name nodes of the graph: the double refuses an
        unknown name rather than skip nothing in silence."""
        if self.options["precision"] != "fp8" or not self.options["fp8_skip_op_names"]:
            return
        nodes = {n.name for n in model.graph.node}
        names = [n.strip() for n in str(self.options["fp8_skip_op_names"]).split(",") if n.strip()]
        unknown = [n for n in names if n not in nodes]
        if unknown:
            raise ValueError(f"fp8_skip_op_names: {unknown[0]!r} is not a node of the model")

    def _graph_inputs(self, model):
        inits = {i.name for i in model.graph.initializer}
        return [i for i in model.graph.input if i.name not in inits]

    def _fix_shapes(self, model):
        shapes = self.options["input_shape"] or {}
        inputs = {i.name: i for i in self._graph_inputs(model)}
        unknown = sorted(set(shapes) - set(inputs))
        if unknown:
            raise ValueError(f"input_shape names {unknown} are not model inputs {sorted(inputs)}")
        for name, value in inputs.items():
            dims = value.type.tensor_type.shape.dim
            if name in shapes:
                if len(shapes[name]) != len(dims):
                    raise ValueError(
                        f"input_shape[{name!r}] has rank {len(shapes[name])}, "
                        f"the model's input has rank {len(dims)}"
                    )
                for d, size in zip(dims, shapes[name], strict=True):
                    d.ClearField("dim_param")
                    d.dim_value = int(size)
            elif self.options["batch_size"] is not None:
                dims[self.options["batch_axis"]].ClearField("dim_param")
                dims[self.options["batch_axis"]].dim_value = self.options["batch_size"]
            if any(not d.HasField("dim_value") for d in dims):
                raise ValueError(f"input {name!r} has a dynamic shape; give it in input_shape")

    def _int64_inputs_to_int32(self, model):
        """PopRT feeds int32 to the IPU: int64 inputs become int32 (a Cast keeps the graph
        valid)."""
        casts = []
        for value in self._graph_inputs(model):
            if value.type.tensor_type.elem_type != TensorProto.INT64:
                continue
            inner = value.name + "__int64"
            for node in model.graph.node:
                node.input[:] = [inner if i == value.name else i for i in node.input]
            value.type.tensor_type.elem_type = TensorProto.INT32
            casts.append(helper.make_node("Cast", [value.name], [inner], to=TensorProto.INT64))
        for cast in reversed(casts):
            model.graph.node.insert(0, cast)
