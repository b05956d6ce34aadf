"""The arms of the peer benchmark (benchmarks/peers.py), each loaded in its own warm process.

- `kit`: the row's configuration chosen by the kit's per-row search, loaded through the kit's
  backend and timed through the kit's own timed window (`Session.measure_window`).
- `ort-fp32`: plain ONNX Runtime, default session options, `session.run` per call.
- `ov-f32`, `ov-bf16`: plain OpenVINO on the same export, static shapes at the batch, the
  inference precision hint set (OpenVINO picks bf16 by itself where the CPU has it), the default
  performance hint, `infer` per call.
- GPU peers: benchmarks/peer_gpu_arms.py.
- `ov-int8`: NNCF post-training quantisation of the same graph, calibrated on PEER_CALIBRATION
  seeded samples one at a time, reshaped to the batch, then as `ov-f32` (FP8 rows only).

A worker answers three commands over its pipe: ('outputs',) → the outputs for the seeded inputs
(numerics against the ORT fp32 arm), ('round', seconds) → throughput over one timed round,
('close',).
"""

from __future__ import annotations

import resource
import time
import traceback

import numpy as np

from benchmarks.common import LoopArm
from benchmarks.peer_gpu_arms import make_gpu_arm
from kit.backends import Placement, require_backend
from kit.measure.window import MeasureConfig
from kit.models import export_model

PEER_CALIBRATION = 50  # seeded samples the peer's NNCF int8 calibrates on
CPU_ARMS = ("ort-fp32", "ov-f32", "ov-bf16", "ov-int8")


class KitArm:
    def __init__(self, model, plan: dict, batch: int):
        self.inputs = model.make_inputs(batch)
        self.batch = batch
        self.session = require_backend(plan["backend"]).load(
            model, Placement.from_plan(plan).backend_config(), batch
        )
        self.description = {
            "how": "the kit's chosen configuration, the kit's timed window",
            **self.session.description,
        }

    def outputs(self) -> list[np.ndarray]:
        return self.session.run(self.inputs)

    def round(self, seconds: float) -> dict:
        cfg = MeasureConfig(warmup=0, min_duration_s=seconds, min_count=1)
        m = self.session.measure_window(self.inputs, self.batch, cfg)
        return {"throughput": float(m.throughput), "calls": int(m.latency.count)}


class OrtArm(LoopArm):
    def __init__(self, model, batch: int):
        import onnxruntime as ort

        self.batch, inputs = batch, model.make_inputs(batch)
        session = ort.InferenceSession(str(model.onnx_path), providers=["CPUExecutionProvider"])
        self.call = lambda: session.run(None, inputs)
        opts = session.get_session_options()
        self.description = {
            "how": "plain ONNX Runtime: default session options, session.run per call",
            "onnxruntime": ort.__version__,
            "precision": "fp32",
            "intra_op_threads": opts.intra_op_num_threads,
            "graph_optimization": str(opts.graph_optimization_level),
        }


class OvArm(LoopArm):
    def __init__(self, model, batch: int, precision: str):
        import openvino as ov

        self.batch, inputs = batch, model.make_inputs(batch)
        core = ov.Core()
        ov_model = core.read_model(str(model.onnx_path))
        extra = {}
        if precision == "int8":
            ov_model, extra = quantize(model, ov_model)
        ov_model.reshape({k: list(v.shape) for k, v in inputs.items()})
        hint = "f32" if precision == "int8" else precision
        compiled = core.compile_model(ov_model, "CPU", {"INFERENCE_PRECISION_HINT": hint})
        request = compiled.create_infer_request()
        outs = list(compiled.outputs)

        def call() -> list:  # one inference per call, every output read from it
            result = request.infer(inputs)
            return [result[o] for o in outs]

        self.call = call
        self.description = {
            "how": f"plain OpenVINO: static shapes, INFERENCE_PRECISION_HINT {hint}, default "
            f"performance hint, infer per call",
            "openvino": ov.__version__,
            "precision": "fp32" if precision == "f32" else precision,  # the kit's run precision
            "inference_precision": prop(compiled, "INFERENCE_PRECISION_HINT"),
            "performance_hint": prop(compiled, "PERFORMANCE_HINT"),
            "threads": prop(compiled, "INFERENCE_NUM_THREADS"),
            **extra,
        }


def prop(compiled, name: str) -> str:
    value = compiled.get_property(name)
    return value.to_string() if hasattr(value, "to_string") else str(value)


def quantize(model, ov_model):
    """NNCF int8 calibrated one sample at a time (as a user calibrates on a sample set, and as the
    kit does): at the row's batch, BERT's activation statistics at batch 45 took 18 GB and were
    killed for memory. The caller reshapes the quantized model to the batch."""
    import nncf

    ov_model.reshape({k: list(v.shape) for k, v in model.make_inputs(1).items()})
    data = [model.make_inputs(1, seed=100 + s) for s in range(PEER_CALIBRATION)]
    q = nncf.quantize(ov_model, nncf.Dataset(data), subset_size=PEER_CALIBRATION)
    return q, {
        "nncf": nncf.__version__,
        "calibration": f"{PEER_CALIBRATION} seeded samples, batch 1",
    }


def make_arm(arm: str, model_name: str, batch: int, plan: dict | None):
    model = export_model(model_name)
    if arm == "kit":
        return KitArm(model, plan, batch)
    if arm not in CPU_ARMS:
        return make_gpu_arm(arm, model, batch)
    if arm == "ort-fp32":
        return OrtArm(model, batch)
    return OvArm(model, batch, {"ov-f32": "f32", "ov-bf16": "bf16", "ov-int8": "int8"}[arm])


def peak_rss_mb() -> float:
    """This worker's peak resident memory: VmHWM (reset at exec; ru_maxrss would carry the parent's
    peak into a spawned worker), else ru_maxrss (KiB on Linux)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def serve(conn, arm: str, model_name: str, batch: int, plan: dict | None) -> None:
    """The worker process: load, warm up, then answer commands until 'close'."""
    try:
        started = time.perf_counter()
        a = make_arm(arm, model_name, batch, plan)
        a.outputs()  # warm-up
        conn.send(
            {
                "ok": True,
                "description": a.description,
                "load_s": round(time.perf_counter() - started, 1),
                "peak_rss_mb": peak_rss_mb(),
            }
        )
    except Exception as exc:  # noqa: BLE001 - a peer that cannot load is reported, never a crash
        conn.send(
            {
                "ok": False,
                "reason": f"{type(exc).__name__}: {str(exc).strip()[:300]}",
                "trace": traceback.format_exc(limit=3),
            }
        )
        conn.close()
        return
    while True:
        cmd = conn.recv()
        if cmd[0] == "close":
            break
        try:
            if cmd[0] == "outputs":
                conn.send(
                    {"ok": True, "outputs": [np.asarray(o, dtype=np.float32) for o in a.outputs()]}
                )
            else:
                conn.send({"ok": True, **a.round(cmd[1]), "peak_rss_mb": peak_rss_mb()})
        except Exception as exc:  # noqa: BLE001
            conn.send({"ok": False, "reason": f"{type(exc).__name__}: {exc}"})
    conn.close()
