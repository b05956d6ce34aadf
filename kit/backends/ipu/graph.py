"""ByteMLPerf's IPU settings checked against the kit's own graphs.

ByteMLPerf's settings were written for its own exports: its fp8 skip list names nodes of those
graphs, and its pattern passes expect the op patterns of its tf2onnx/torch exports. On the kit's
exports a name may not exist and a pass may not fire; PopRT then silently does less than the
published recipe. This module resolves the skip names against the exported graph (an unknown one is
an error naming it) and, after conversion, judges whether each pass fired from the op types of the
conversion with it against the same conversion with it skipped (one that did not makes the row not
comparable, named).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass

from kit.backends.ipu.poprt_worker.convert import INPUT_CAST
from kit.errors import InvalidParameter
from kit.results.reasons import DifferenceCode, Reason


def module_path(node_name: str) -> str:
    """A node's module path and op, the same for ByteMLPerf's and the kit's torch exports.

    The torch exporter names scopes either by attribute (`/layer1/0/downsample/0/Conv`) or by the
    qualified name within the parent (`/layer1/layer1.0/downsample/downsample.0/Conv`); both become
    `layer1.0.downsample.0/Conv`.

    >>> module_path("/layer1/layer1.0/downsample/downsample.0/Conv")
    'layer1.0.downsample.0/Conv'
    >>> module_path("/layer1/0/downsample/0/Conv")
    'layer1.0.downsample.0/Conv'
    """
    parts = [p for p in node_name.split("/") if p]
    if len(parts) < 2:
        return node_name
    *scopes, op = parts
    atoms: list[str] = []
    previous = ""
    for scope in scopes:
        atoms.append(
            scope[len(previous) + 1 :] if previous and scope.startswith(previous + ".") else scope
        )
        previous = scope
    return ".".join(atoms) + "/" + op


def resolve_fp8_skips(names: str, node_names: Iterable[str], model: str) -> dict[str, str]:
    """Each name of ByteMLPerf's comma-separated `fp8_skip_op_names` -> the node of the kit's graph
    it means: the same name, else the one node with the same module path. A name that maps to no
    node (or to several) is an InvalidParameter naming it and the closest nodes."""
    nodes = [n for n in node_names if n]
    by_path: dict[str, list[str]] = {}
    for node in nodes:
        by_path.setdefault(module_path(node), []).append(node)
    resolved = {}
    for name in (n.strip() for n in names.split(",")):
        if not name:
            continue
        if name in nodes:
            resolved[name] = name
            continue
        found = by_path.get(module_path(name), [])
        if len(found) != 1:
            close = difflib.get_close_matches(name, nodes, n=3, cutoff=0.3)
            why = (
                f"{len(found)} nodes share its module path {module_path(name)!r}"
                if found
                else "no node has it"
            )
            raise InvalidParameter(
                "fp8_skip_op_names",
                name,
                f"a node of {model}'s exported graph ({why}); "
                f"closest: {', '.join(close) or 'none'}",
            )
        resolved[name] = found[0]
    return resolved


def graph_node_names(onnx_path: str) -> list[str]:
    import onnx

    return [n.name for n in onnx.load(onnx_path, load_external_data=False).graph.node]


@dataclass(frozen=True)
class PassCheck:
    """What a pass leaves in the converted graph, from PopRT's pass docs (passes.html), judged
    between the graph converted without the pass (`without`) and with it (`with_`)."""

    effect: str  # PopRT's description of the rewrite
    evidence: str  # what the kit looks for, in words

    def fired(self, without: dict[str, int], with_: dict[str, int]) -> bool:
        return _RULES[self.evidence](without, with_)


_RULES = {
    "an AttentionMask op": lambda b, a: a.get("AttentionMask", 0) > b.get("AttentionMask", 0),
    "more Split ops than before (Q, K and V from one fused MatMul)": lambda b, a: (
        a.get("Split", 0) > b.get("Split", 0) and a.get("MatMul", 0) < b.get("MatMul", 0)
    ),
    "fewer Neg ops than before (the element-wise rotate-half gone)": lambda b, a: (
        a.get("Neg", 0) < b.get("Neg", 0)
    ),
    "fewer Div/Mul ops than before (the 1/sqrt(d) node gone)": lambda b, a: (
        a.get("Div", 0) + a.get("Mul", 0) < b.get("Div", 0) + b.get("Mul", 0)
    ),
    "fewer Casts reading a graph input than before (the input Cast gone)": lambda b, a: (
        a.get(INPUT_CAST, 0) < b.get(INPUT_CAST, 0)
    ),
    "a FastNorm op": lambda b, a: a.get("FastNorm", 0) > b.get("FastNorm", 0),
}

PASS_CHECKS = {
    "insert_attention_mask": PassCheck(
        "Reshape-Cast-Sub-Mul replaced with Cast-AttentionMask", "an AttentionMask op"
    ),
    "fused_attention": PassCheck(
        "multi-head attention's three MatMuls fused into one MatMul + Split",
        "more Split ops than before (Q, K and V from one fused MatMul)",
    ),
    "matmul_rotary_embedding": PassCheck(
        "element-wise rotary embedding replaced with an equivalent MatMul",
        "fewer Neg ops than before (the element-wise rotate-half gone)",
    ),
    "pre_scale": PassCheck(
        "Q scaled to Q/sqrt(d) and the 1/sqrt(d) node removed",
        "fewer Div/Mul ops than before (the 1/sqrt(d) node gone)",
    ),
    "remove_input_cast": PassCheck(
        "input(fp16) -> Cast(int32) -> Gather becomes input(int32) -> Gather",
        "fewer Casts reading a graph input than before (the input Cast gone)",
    ),
    "replace_groupnorm_with_fast_norm": PassCheck(
        "GroupNormalization (fp16, num_groups 1) replaced with FastNorm", "a FastNorm op"
    ),
}


BY_DIFFERENCE = (
    "the graph converted with the pass against the same conversion with it left out of used_passes"
)


def evidence_passes(passes: Iterable[str]) -> list[str]:
    """The passes the worker converts a second time without, to judge them by difference."""
    return [p for p in passes if p in PASS_CHECKS]


def check_passes(
    passes: Iterable[str], after: dict[str, int] | None, without: dict[str, dict[str, int]] | None
) -> dict:
    """Per pass: {"applied": "yes" / "no" / "not checked", "evidence", "effect", "method"}, from the
    op types of the converted graph (`after`) and of the same conversion without that pass
    (`without[pass]`); None where the worker did not report them (a PopEF cached before it did)."""
    out = {}
    for name in passes:
        check = PASS_CHECKS.get(name)
        if check is None:
            out[name] = {"applied": "not checked", "evidence": "the kit has no check for this pass"}
        elif after is None or without is None or name not in without:
            out[name] = {
                "applied": "not checked",
                "evidence": "the worker reported no conversion without the pass",
                "effect": check.effect,
            }
        else:
            out[name] = {
                "applied": "yes" if check.fired(without[name], after) else "no",
                "evidence": check.evidence,
                "effect": check.effect,
                "method": BY_DIFFERENCE,
            }
    return out


def not_comparable_reasons(passes: dict) -> list[str]:
    """A note per pass that did not fire (or could not be checked) on the kit's graph."""
    return [r.text for r in pass_differences(passes)]


def pass_differences(passes: dict) -> list[Reason]:
    """The same notes, each with its code (a pass that did not fire, or one not checked)."""
    return [
        Reason(
            f"not comparable: ByteMLPerf's pass {name!r} ({r.get('effect', '?')}) did not fire on "
            f"the kit's export (looked for {r['evidence']})",
            DifferenceCode.PASS_NOT_FIRED,
        )
        if r["applied"] == "no"
        else Reason(
            f"not comparable: ByteMLPerf's pass {name!r} could not be checked ({r['evidence']})",
            DifferenceCode.PASS_UNCHECKED,
        )
        for name, r in passes.items()
        if r["applied"] != "yes"
    ]


#: The passes that make a model's attention packing-aware (samples sharing a row kept apart).
PACKING_PASSES = ("insert_attention_mask",)


def keeps_samples_apart(passes: dict) -> bool:
    """Whether a pass that keeps packed samples apart fired (its check said "yes")."""
    return any((passes.get(name) or {}).get("applied") == "yes" for name in PACKING_PASSES)
