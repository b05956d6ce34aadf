"""What a row's search cost: its time, and how much of it went to loading candidates (exporting,
converting, quantising and compiling them), which a cold search pays once and the cache keeps.

>>> def probe(label, load_s, shared_from="", compile_s=None):
...     return {"label": label, "backend": "onnxruntime", "precision": "fp32", "device": "cpu", "options": {}, "threads": None,
...             "native": True, "why": "", "load_s": load_s, "shared_from": shared_from, "compile_s": compile_s}
>>> plan = {"backend": "onnxruntime", "precision": "fp32"}
>>> search_cost(Decision.from_dict({"searched_s": 71.8, "plan": plan, "probes": [
...     probe("openvino int8 (cpu)", 54.0), probe("onnxruntime int8 (cpu)", 8.4),
...     probe("openvino bf16 (cpu)", 5.3, "the FP16 row's search")]}))
'searched in 71.8 s: 62.4 s of it loading 2 candidates (the longest: openvino int8 (cpu), 54 s); 1 probe taken from the sibling row'
>>> search_cost(Decision.from_dict({"searched_s": 40.0, "plan": plan, "probes": [probe("torch fp16 compile (cuda)", 35.0, compile_s=33.5),
...     probe("torch fp16 (cuda)", 2.0)]}))
'searched in 40 s: 37 s of it loading 2 candidates (the longest: torch fp16 compile (cuda), 35 s), 33.5 s of that compiling 1'
>>> search_cost(Decision.from_dict({"searched_s": 12.0, "plan": plan, "probes": [{**probe("torch fp16 compile (cuda)", 8.0, compile_s=6.5),
...     "compile_cache": {"hit": 1, "miss": 0, "bypass": 0}}]}))
"searched in 12 s: 8 s of it loading 1 candidate (the longest: torch fp16 compile (cuda), 8 s), 6.5 s of that compiling 1 (1 from inductor's cache)"
>>> search_cost(Decision.from_dict({"searched_s": 70.0, "plan": plan, "probes": [{**probe("onnxruntime fp16 (tensorrt)", 62.0, compile_s=61.0),
...     "device": "tensorrt", "engine_reused": False}, {**probe("onnxruntime int8 (tensorrt)", 4.0, compile_s=3.5), "precision": "int8",
...     "device": "tensorrt", "engine_reused": True}]}))
'searched in 70 s: 66 s of it loading 2 candidates (the longest: onnxruntime fp16 (tensorrt), 62 s), 64.5 s on 2 TensorRT engines (1 built, 1 read from the engine cache)'
"""  # noqa: E501

from __future__ import annotations

from dataclasses import dataclass

from kit.backends.compile_cache import read_from_cache
from kit.search.decision import Decision
from kit.search.probe import Probe


def search_cost(decision: Decision) -> str:
    """One phrase: the search's seconds, the seconds its own candidates took to load (probes taken
    from the sibling row's search are not counted again) and the longest load."""
    total = decision.searched_s
    if total is None:
        return "the search's time was not recorded"
    own = [p for p in decision.probes if p.load_s is not None and not p.shared_from]
    shared = sum(1 for p in decision.probes if p.shared_from)
    text = f"searched in {total:.3g} s"
    if own:
        longest = max(own, key=lambda p: p.load_s or 0.0)
        text += (
            f": {sum(p.load_s or 0.0 for p in own):.3g} s of it loading {len(own)} candidate"
            f"{'s' if len(own) != 1 else ''} (the longest: {longest.label}, {longest.load_s:.3g} s)"
        )
        text += compiling(own)
    if shared:
        text += f"; {shared} probe{'s' if shared != 1 else ''} taken from the sibling row"
    return text


@dataclass(frozen=True)
class CompileWork:
    """A search's probes that compiled, by what they made: torch.compile graphs (`compiled`, of
    them `cached`: every graph read from inductor's cache) and TensorRT engines (`engines`, of them
    `built` and `read` from the engine cache; an older kit's probe says neither). Only probes with
    a `compile_s` of seconds count."""

    compiled: list[Probe]
    cached: list[Probe]
    engines: list[Probe]
    built: list[Probe]
    read: list[Probe]

    @classmethod
    def of(cls, probes: list[Probe]) -> CompileWork:
        timed = [p for p in probes if isinstance(p.compile_s, int | float)]
        engines = [p for p in timed if p.placement.builds_engine]
        compiled = [p for p in timed if not p.placement.builds_engine]
        return cls(
            compiled=compiled,
            cached=[p for p in compiled if read_from_cache(p.compile_cache)],
            engines=engines,
            built=[p for p in engines if p.engine_reused is False],
            read=[p for p in engines if p.engine_reused is True],
        )


def compiling(probes: list[Probe]) -> str:
    """Of the probes' loads, the seconds torch.compile compiled and TensorRT made engines:
    ', 33.5 s of that compiling 1 (1 from inductor's cache), 61 s on 1 TensorRT engine (1 built, 0
    read from the engine cache)', or ''."""
    work = CompileWork.of(probes)
    text = ""
    if work.compiled:
        text += f", {seconds(work.compiled):.3g} s of that compiling {len(work.compiled)}"
        if work.cached:
            text += f" ({len(work.cached)} from inductor's cache)"
    if work.engines:
        plural = "s" if len(work.engines) != 1 else ""
        text += (
            f", {seconds(work.engines):.3g} s on {len(work.engines)} TensorRT engine{plural} "
            f"({len(work.built)} built, {len(work.read)} read from the engine cache)"
        )
    return text


def seconds(probes: list[Probe]) -> float:
    return sum(p.compile_s or 0.0 for p in probes)
