"""`make bench`'s backend_speedups times the candidates a row's search measures (OpenVINO
included), each against torch eager fp32 and ONNX Runtime fp32 at the backends' defaults."""

from __future__ import annotations

import pytest

from benchmarks.backend_speedups import BASELINE, REFERENCE, bench_candidates, plain
from kit.errors import KitError
from kit.search.candidates import row_candidates

SPR = {"avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_int8"}
AVX2 = {"avx2"}


def labels(candidates) -> set[str]:
    return {c.label for c in candidates}


def test_the_quick_candidates_and_both_baselines_without_compiles_or_emulation():
    quick = bench_candidates("torch", "quick", compiled=False, emulated=False, flags=SPR)
    plains = {plain(c) for c in quick}
    assert {BASELINE, REFERENCE} <= plains  # eager fp32 is a full-search candidate: kept anyway
    assert {c.placement.backend for c in quick} == {"onnxruntime", "openvino", "torch"}
    assert all(c.native and not c.placement.options.compiles for c in quick)
    searched = [c for c in row_candidates("torch", "cpu", flags=SPR) if c.depth == "quick"]
    assert labels(c for c in searched if c.native and not c.placement.options.compiles) == labels(
        c for c in quick if plain(c) != BASELINE
    )


def test_full_depth_compiles_and_emulation_add_what_they_say():
    quick = labels(bench_candidates("torch", "quick", compiled=False, emulated=False, flags=AVX2))
    full = labels(bench_candidates("torch", "full", compiled=False, emulated=False, flags=AVX2))
    assert quick < full and any("threads=" in label for label in full - quick)
    compiled = bench_candidates("torch", "full", compiled=True, emulated=False, flags=AVX2)
    assert any(c.placement.options.compiles for c in compiled)
    emulated = bench_candidates("torch", "quick", compiled=False, emulated=True, flags=AVX2)
    assert any(not c.native for c in emulated)  # bf16/fp16 on an AVX2-only CPU


def test_a_tensorflow_model_has_no_torch_candidates_and_a_bad_depth_is_named():
    tf = bench_candidates("tensorflow", "quick", compiled=True, emulated=True, flags=SPR)
    assert tf and all(c.placement.backend != "torch" for c in tf)
    assert REFERENCE in {plain(c) for c in tf} and BASELINE not in {plain(c) for c in tf}
    with pytest.raises(KitError, match="BENCH_SEARCH_DEPTH='deep'"):
        bench_candidates("torch", "deep", compiled=False, emulated=False)
