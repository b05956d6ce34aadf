"""Host-side cost of one IpuSession.run (kit -> worker pipe -> Runner.execute -> back) over the
PopRT double's bare Runner.execute, for a 1x3x224x224 float32 input. Target: at most 2 ms per call.

Both are timed in interleaved rounds in this run (the double's execute in this process, on the
same compiled PopEF); the figure is the median of per-round differences. Knobs: BENCH_IPU_ROUNDS,
BENCH_IPU_CALLS, BENCH_STRICT=1 (a missed target fails).
"""

from __future__ import annotations

import importlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from benchmarks.common import env_int, load_note, strict

TARGET_MS = 2.0
ROOT = Path(__file__).resolve().parents[1]
DOUBLE = ROOT / "tests" / "poprt_double"


def image_model(path: Path, opset: int) -> Path:
    """[1, 3, 224, 224] -> global average pool -> [1, 1000] logits: the I/O of an ImageNet model, at
    `opset` (the IPU backend's export opset: PopRT's Converter cannot bring opset 17 down to 11)."""
    w = numpy_helper.from_array(
        np.random.default_rng(0).standard_normal((3, 1000)).astype(np.float32), "W"
    )
    graph = helper.make_graph(
        [
            helper.make_node("ReduceMean", ["input"], ["pooled"], axes=[2, 3], keepdims=0),
            helper.make_node("MatMul", ["pooled", "W"], ["logits"]),
        ],
        "image",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, 224, 224])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1000])],
        [w],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    onnx.save(model, str(path))
    return path


def use_double(state: str) -> None:
    os.environ.update(
        {
            "KIT_IPU_PYTHON": sys.executable,
            "KIT_POPRT_DOUBLE_STATE": state,
            "KIT_POPRT_DOUBLE_NUM_DEVICES": "2",
            "KIT_POPRT_DOUBLE_ATTACH_S": "0.01",
            "PYTHONPATH": os.pathsep.join(
                [str(DOUBLE), str(ROOT), os.environ.get("PYTHONPATH", "")]
            ),
        }
    )
    sys.path.insert(0, str(DOUBLE))


def per_call_s(call, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        call()
    return (time.perf_counter() - start) / n


def main() -> int:
    from kit.backends import BackendConfig, export_opset
    from kit.backends.ipu import IpuBackend
    from kit.models.spec import ExportedModel, InputSpec, WeightsInfo

    rounds, calls = env_int("BENCH_IPU_ROUNDS", 7), env_int("BENCH_IPU_CALLS", 200)
    with tempfile.TemporaryDirectory() as tmp:
        use_double(tmp)
        model = ExportedModel(
            name="image-1x3x224x224",
            onnx_path=image_model(Path(tmp) / "m.onnx", export_opset("ipu")),
            inputs=(InputSpec("input", (1, 3, 224, 224), "float32"),),
            outputs=("logits",),
            weights=WeightsInfo("random", "seed 0"),
        )
        session = IpuBackend().load(
            model, BackendConfig("fp32", "ipu", options={"cache_dir": tmp}), 1
        )
        inputs = model.make_inputs(1, seed=0)
        runtime = importlib.import_module("poprt.runtime")
        runner = runtime.Runner(
            str(Path(tmp) / session.description["popef"]), runtime.RuntimeConfig()
        )
        feeds = {"input": inputs["input"]}
        outs = {"logits": np.zeros((1, 1000), np.float32)}
        diffs, kit_ms, bare_ms = [], [], []
        for _ in range(rounds):
            kit = per_call_s(lambda: session.run(inputs), calls)
            bare = per_call_s(lambda: runner.execute(feeds, outs), calls)
            kit_ms.append(kit * 1e3)
            bare_ms.append(bare * 1e3)
            diffs.append((kit - bare) * 1e3)
        session.close()
    overhead = statistics.median(diffs)
    print(
        f"IpuSession.run {statistics.median(kit_ms):.3f} ms/call, double's bare execute "
        f"{statistics.median(bare_ms):.3f} ms/call: host-side overhead {overhead:.3f} ms/call "
        f"(median of {rounds} rounds x {calls} calls; range {min(diffs):.3f}-{max(diffs):.3f}); "
        f"target <= {TARGET_MS} ms. {load_note()}"
    )
    if overhead > TARGET_MS:
        print(
            f"MISSED: {overhead:.3f} ms > {TARGET_MS} ms"
            + ("" if strict() else " (noise? BENCH_STRICT=1 fails)")
        )
        return 1 if strict() else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
