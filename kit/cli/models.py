"""`kit models`, `kit export MODEL`, `kit fetch-weights MODEL`."""

from __future__ import annotations

import argparse
import time

from kit.models import DEFAULT_OPSET, MODELS, export_model
from kit.models.export import latest_cached_meta
from kit.models.spec import InputSpec
from kit.models.weights import fetch_weights


def register(subparsers) -> None:
    p = subparsers.add_parser("models", help="list the model zoo (params, FLOPs/sample, inputs)")
    p.add_argument(
        "--export", action="store_true", help="export entries not cached yet to fill in figures"
    )
    p.add_argument("--small", action="store_true", help="the reduced test-size variants")
    p.set_defaults(func=cmd_models)

    p = subparsers.add_parser("export", help="build, export to ONNX, verify and cache one model")
    p.add_argument("model")
    p.add_argument("--small", action="store_true", help="reduced-size variant (for tests)")
    p.add_argument("--weights", default="random", help="'random' (default), 'local' or a directory")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--opset", type=int, default=DEFAULT_OPSET)
    p.set_defaults(func=cmd_export)

    p = subparsers.add_parser(
        "fetch-weights", help="download a model's public checkpoint (needs internet)"
    )
    p.add_argument("model")
    p.set_defaults(func=cmd_fetch_weights)


def format_inputs(inputs: tuple[InputSpec, ...]) -> str:
    return ", ".join(
        f"{i.name} {'x'.join(map(str, i.shape))} {i.dtype}{'' if i.batched else ' (fixed)'}"
        for i in inputs
    )


def human(value: float | None, unit: str = "") -> str:
    if value is None:
        return "-"
    for scale, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.2f}{suffix}{unit}"
    return f"{value:.0f}{unit}"


def model_rows(export: bool = False, small: bool = False) -> list[dict]:
    """One row per entry; figures from cached exports (exporting missing ones when asked)."""
    rows = []
    for name in MODELS.names():
        entry = MODELS.get(name)
        meta = latest_cached_meta(name, small)
        if meta is None and export:
            meta = export_model(name, small=small).to_dict()
        params = meta["params"] if meta else None
        rows.append(
            {
                "model": name,
                "framework": entry.framework,
                "task": entry.task,
                "params": human(params)
                if params
                else f"~{human(entry.reference_params)} (ref)"
                if entry.reference_params
                else "-",
                "flops_per_sample": human(meta.get("flops_per_sample") if meta else None, "FLOP"),
                "inputs": format_inputs(entry.inputs_for(small)),
            }
        )
    return rows


def cmd_models(args: argparse.Namespace) -> int:
    rows = model_rows(export=args.export, small=args.small)
    widths = {k: max(len(k), *(len(r[k]) for r in rows)) for k in rows[0] if k != "inputs"}
    print("  ".join(k.ljust(w) for k, w in widths.items()) + "  inputs")
    for r in rows:
        print("  ".join(r[k].ljust(w) for k, w in widths.items()) + "  " + r["inputs"])
    if not args.export:
        print(
            "\n'-' / (ref): not exported yet; `kit models --export` or `kit export MODEL` fills "
            "them in"
        )
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    m = export_model(
        args.model, small=args.small, weights=args.weights, seed=args.seed, opset=args.opset
    )
    took = time.perf_counter() - started
    v = m.verification
    print(f"model:       {m.name}{' (small)' if m.small else ''}")
    print(f"onnx:        {m.onnx_path}")
    print(f"size:        {m.onnx_path.stat().st_size / 1e6:.1f} MB")
    print(f"time:        {took:.1f} s (export {v.get('export_seconds', '?')} s when first built)")
    print(f"weights:     {m.weights.label}")
    print(f"params:      {m.params:,}" if m.params else "params:      -")
    print(f"flops/sample:{human(m.flops_per_sample, 'FLOP'):>12}")
    print(f"inputs:      {format_inputs(m.inputs)}")
    print(f"outputs:     {', '.join(m.outputs)}")
    print(
        f"verified:    checker {v.get('checker')}, ORT vs {v.get('reference')}: "
        f"max abs diff {v.get('ort_max_abs_diff', float('nan')):.2e}"
    )
    return 0


def cmd_fetch_weights(args: argparse.Namespace) -> int:
    path = fetch_weights(args.model, MODELS.get(args.model).hub_id)
    print(f"downloaded {MODELS.get(args.model).hub_id} to {path}; use --weights local")
    return 0
