"""What a row's search cost: its time, and how much of it went to loading candidates (exporting,
converting, quantising and compiling them), which a cold search pays once and the cache keeps.

>>> search_cost({"searched_s": 71.8, "probes": [
...     {"label": "openvino int8 (cpu)", "load_s": 54.0}, {"label": "onnxruntime int8 (cpu)", "load_s": 8.4},
...     {"label": "openvino bf16 (cpu)", "load_s": 5.3, "shared_from": "the FP16 row's search"}]})
'searched in 71.8 s: 62.4 s of it loading 2 candidates (the longest: openvino int8 (cpu), 54 s); 1 probe taken from the sibling row'
"""

from __future__ import annotations


def search_cost(decision: dict) -> str:
    """One phrase: the search's seconds, the seconds its own candidates took to load (probes taken
    from the sibling row's search are not counted again) and the longest load."""
    total = decision.get("searched_s")
    if total is None:
        return "the search's time was not recorded"
    probes = decision.get("probes") or []
    own = [p for p in probes if p.get("load_s") is not None and not p.get("shared_from")]
    shared = sum(1 for p in probes if p.get("shared_from"))
    text = f"searched in {total:.3g} s"
    if own:
        longest = max(own, key=lambda p: p["load_s"])
        text += (f": {sum(p['load_s'] for p in own):.3g} s of it loading {len(own)} candidate"
                 f"{'s' if len(own) != 1 else ''} (the longest: {longest['label']}, {longest['load_s']:.3g} s)")
    if shared:
        text += f"; {shared} probe{'s' if shared != 1 else ''} taken from the sibling row"
    return text
