"""Convert and compile once per key: PopRT's Converter then Compiler, the PopEF cached on disk, and
the op types of the graph before and after conversion recorded beside it."""

import hashlib
import json
import os
import time

from .device import WORKER_VERSION
from .step_memory import StepMemory


def batched_shape(spec, batch_size):
    shape = list(spec["shape"])
    if spec.get("batched", True):
        shape[0] = shape[0] * batch_size
    return shape


def converter_kwargs(job):
    kwargs = dict(job.get("converter_options") or {})
    kwargs["input_shape"] = {s["name"]: batched_shape(s, job["batch_size"]) for s in job["inputs"]}
    kwargs["precision"] = job["precision"]
    return kwargs


def compiler_options(job, ipu_version):
    """CompilerOptions with every given attribute set (PopRT raises on an unknown one)."""
    from poprt.compiler import CompilerOptions

    wanted = dict(job.get("compiler_options") or {})
    if not wanted.get("ipu_version") and ipu_version:
        wanted["ipu_version"] = ipu_version
    opts = CompilerOptions()
    for name in sorted(wanted):
        try:
            setattr(opts, name, wanted[name])
        except AttributeError:
            raise ValueError(
                f"unknown compiler option {name!r} (PopRT's CompilerOptions has no such attribute)"
            ) from None
    return opts, wanted


def file_digest(path):
    digest = hashlib.sha1()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def popef_path(job, kwargs, options, poprt_version):
    """Cache key: model bytes + every option + pack preparation + the PopRT version."""
    key = json.dumps(
        {
            "model": file_digest(job["onnx_path"]),
            "converter": kwargs,
            "compiler": options,
            "pack": job.get("pack_inputs"),
            "poprt": poprt_version,
            "evidence": job.get("evidence_passes"),
            "worker": WORKER_VERSION,
        },
        sort_keys=True,
        default=str,
    )
    digest = hashlib.sha1(key.encode()).hexdigest()[:16]
    stem = os.path.splitext(os.path.basename(job["onnx_path"]))[0]
    name = "{}-{}-bs{}-{}.popef".format(stem, job["precision"], job["batch_size"], digest)
    return os.path.join(job["cache_dir"], name)


def add_position_ids(model, input_name, like):
    """The kit's equivalent of ByteMLPerf's _update_pack_model: the position-embedding Gather reads
    its indices from a new int input `input_name` (shaped like input `like`), per-sample
    positions."""
    import copy

    inits = {i.name for i in model.graph.initializer}
    gathers = [
        n
        for n in model.graph.node
        if n.op_type == "Gather"
        and n.input[0] in inits
        and "position_embeddings" in (n.input[0] + n.name)
    ]
    if len(gathers) != 1:
        raise ValueError(
            "pack mode needs exactly one position-embedding Gather to feed position_ids; "
            f"found {[n.name for n in gathers]}"
        )
    template = next(i for i in model.graph.input if i.name == like)
    new_input = copy.deepcopy(template)
    new_input.name = input_name
    model.graph.input.append(new_input)
    gathers[0].input[1] = input_name
    remove_dead_nodes(model)
    return model


def remove_dead_nodes(model):
    """Drop nodes whose outputs nothing reads (what removing ByteMLPerf's named nodes achieves)."""
    graph = model.graph
    while True:
        used = {o.name for o in graph.output}
        for node in graph.node:
            used.update(node.input)
        dead = [n for n in graph.node if not any(o in used for o in n.output)]
        if not dead:
            return
        for node in dead:
            graph.node.remove(node)


INPUT_CAST = "Cast(graph input)"  # a pseudo op type: Casts that read a graph input directly


def op_types(model):
    """How many nodes of each op type the graph has, plus INPUT_CAST (the kit judges from them
    whether a pass fired)."""
    counts = {}
    inputs = {i.name for i in model.graph.input}
    for node in model.graph.node:
        counts[node.op_type] = counts.get(node.op_type, 0) + 1
        if node.op_type == "Cast" and node.input and node.input[0] in inputs:
            counts[INPUT_CAST] = counts.get(INPUT_CAST, 0) + 1
    return counts


def graph_record_path(popef):
    return popef + ".ops.json"


def read_graph_record(popef):
    """The op types recorded when this PopEF was converted, or None (a PopEF from before they
    were)."""
    try:
        with open(graph_record_path(popef)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def prepared_model(job, kwargs):
    """The job's ONNX graph as the Converter gets it (position_ids added for pack mode)."""
    import onnx

    model = onnx.load(job["onnx_path"])
    pack_inputs = job.get("pack_inputs") or {}
    if pack_inputs.get("add") == "position_ids":
        add_position_ids(model, "position_ids", job["pack"]["dynamic_input_name"])
        dynamic = next(s for s in job["inputs"] if s["name"] == job["pack"]["dynamic_input_name"])
        kwargs["input_shape"]["position_ids"] = batched_shape(dynamic, job["batch_size"])
    return model


def without_each_pass(job, kwargs, passes):
    """Per pass: the op types of the graph converted with everything else the same but that pass
    left out of used_passes (a ByteMLPerf pass runs only when named there; `skip_passes`, a str in
    PopRT's docs, is left as the job gave it). Against the real conversion, the difference is that
    pass's alone; PopRT's other passes (layer_norm_pattern, eliminate_nop_cast...) change the same
    counts between the graph before conversion and after, so that comparison cannot tell."""
    from poprt.converter import Converter

    out = {}
    for name in passes:
        alone = dict(kwargs, used_passes=[p for p in kwargs.get("used_passes") or [] if p != name])
        out[name] = op_types(Converter(**alone).convert(prepared_model(job, alone)))
    return out


def compile_popef(job, env):
    """Convert + compile_and_export once per key; returns (path, compile seconds, cached, kwargs,
    options, memory: each step's peak RSS, or why none was measured)."""
    from poprt.compiler import Compiler
    from poprt.converter import Converter

    kwargs = converter_kwargs(job)
    opts, wanted = compiler_options(job, env.get("device", {}).get("ipu_version"))
    path = popef_path(job, kwargs, wanted, env["poprt_version"])
    if os.path.exists(path):
        return (
            path,
            0.0,
            True,
            kwargs,
            wanted,
            {"status": "PopEF from the cache: no conversion ran"},
        )
    os.makedirs(job["cache_dir"], exist_ok=True)
    started = time.perf_counter()
    memory = StepMemory(job.get("memory_needs") or {})
    with memory.step("ipu-convert"):
        model = prepared_model(job, kwargs)
        before = op_types(model)
        converted = Converter(**kwargs).convert(model)
        del model  # the converted copy is all the compiler needs
        record = {
            "op_types_before": before,
            "op_types_after": op_types(converted),
            "op_types_without": without_each_pass(job, kwargs, job.get("evidence_passes") or []),
        }
    with memory.step("ipu-compile"):
        outputs = [o.name for o in converted.graph.output]
        tmp = f"{path}.{os.getpid()}.tmp"
        Compiler.compile_and_export(converted.SerializeToString(), outputs, tmp, opts)
    with open(graph_record_path(tmp), "w") as f:
        json.dump(record, f)
    os.replace(graph_record_path(tmp), graph_record_path(path))
    os.replace(tmp, path)
    return path, time.perf_counter() - started, False, kwargs, wanted, memory.to_dict()
