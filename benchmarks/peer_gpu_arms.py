"""The GPU peers of `make bench-peers` (benchmarks/peers.py): what a GPU user runs instead of the
kit, written with the plain libraries (not the kit's backends), every call host to host as the kit's
is (inputs from pinned host memory, outputs back in host memory, the call over when they are there).

- `torch-eager-fp16`: the zoo's PyTorch model with fp16 weights (`model.half()`), channels_last for
  a convolutional model, inference_mode, `cudnn.benchmark` (fixed shapes); per call a non-blocking
  copy in from a pinned fp16 buffer, the model, a non-blocking copy out into a pinned buffer, the
  stream synchronised.
- `torch-cudagraph-fp16`: the same call captured once in one CUDA graph (copies in, model, copies
  out), replayed and synchronised per call.
- `torch-compile-ro`: `torch.compile(mode="reduce-overhead")` (inductor, CUDA graphs) of the fp16
  model, called as the eager arm.
- `ort-trt-fp16`: plain ONNX Runtime with TensorRT's provider, fp16, its engine cache; `session.run`
  with host arrays per call (where the provider is installed).
- `trt-fp16`: TensorRT's own Python API, fp16 engine from the ONNX export, `execute_async_v3`
  between pinned copies (where `tensorrt` is importable).

`device` is 'cuda' on a GPU; the tests pass 'cpu' with tests/cuda_double.py standing for torch.cuda.
"""

from __future__ import annotations

import numpy as np

from benchmarks.common import LoopArm

TORCH_ARMS = ("torch-eager-fp16", "torch-cudagraph-fp16", "torch-compile-ro")
GRAPH_WARMUP = 3


def torch_fp16_model(model, device: str):
    """The zoo's torch model (the export's weights), fp16 weights on the device, channels_last for a
    CNN."""
    import torch

    from kit.backends.onnx_conversion import is_convolutional
    from kit.backends.torch_backend import build_module

    module = build_module(model).half().to(device)
    return module.to(memory_format=torch.channels_last) if is_convolutional(model.task) else module


def pinned_fp16(inputs: dict) -> list:
    import torch

    tensors = [torch.from_numpy(np.ascontiguousarray(v)) for v in inputs.values()]
    return [(t.half() if t.is_floating_point() else t).pin_memory() for t in tensors]


class TorchGpuArm(LoopArm):
    def __init__(self, model, batch: int, how: str, device: str = "cuda"):
        import torch

        self.batch, self.how = batch, how
        torch.backends.cudnn.benchmark = True  # fixed shapes: what a GPU user sets
        module = torch_fp16_model(model, device)
        if how == "torch-compile-ro":
            module = torch.compile(module, mode="reduce-overhead")
        self.module, self.stream = module, torch.cuda.Stream(device)
        self.host_in = pinned_fp16(model.make_inputs(batch))
        self.dev_in = [torch.empty_like(h, device=device) for h in self.host_in]
        outputs = self.warm_up()
        self.host_out = [torch.empty(o.shape, dtype=o.dtype).pin_memory() for o in outputs]
        self.call = self.capture() if how == "torch-cudagraph-fp16" else self.eager
        self.description = {
            "how": f"plain PyTorch {torch.__version__}, {how}: fp16 weights, pinned fp16 host "
            "buffers, host to host, stream synchronised per call",
            "precision": "fp16",
        }

    def forward(self) -> list:
        import torch

        from kit.backends.torch_backend import flatten_outputs

        with torch.inference_mode():
            return [
                t for t in flatten_outputs(self.module(*self.dev_in)) if isinstance(t, torch.Tensor)
            ]

    def copy_in(self) -> None:
        for d, h in zip(self.dev_in, self.host_in, strict=True):
            d.copy_(h, non_blocking=True)

    def warm_up(self) -> list:
        import torch

        # the model's move to the device and to channels_last are queued on the default stream
        self.stream.wait_stream(torch.cuda.current_stream(self.stream.device))
        with torch.cuda.stream(self.stream):
            for _ in range(GRAPH_WARMUP):
                self.copy_in()
                outputs = self.forward()
        self.stream.synchronize()
        return outputs

    def eager(self) -> list:
        import torch

        with torch.cuda.stream(self.stream):
            self.copy_in()
            for h, o in zip(self.host_out, self.forward(), strict=True):
                h.copy_(o, non_blocking=True)
        self.stream.synchronize()
        return self.host_out

    def capture(self):
        import torch

        from kit.backends.torch_cuda import capture

        def copies_and_model() -> None:
            self.copy_in()
            for h, o in zip(self.host_out, self.forward(), strict=True):
                h.copy_(o, non_blocking=True)

        graph = torch.cuda.CUDAGraph()
        capture(graph, self.stream, self.stream.device, copies_and_model)

        def replay() -> list:
            with torch.cuda.stream(self.stream):
                graph.replay()
            self.stream.synchronize()
            return self.host_out

        return replay

    def outputs(self) -> list[np.ndarray]:
        return [o.float().numpy() for o in self.call()]


class OrtTrtArm(LoopArm):
    def __init__(self, model, batch: int):
        import onnxruntime as ort

        from kit.paths import cache_dir

        self.batch, inputs = batch, model.make_inputs(batch)
        options = {
            "trt_fp16_enable": True,
            "trt_engine_cache_enable": True,
            # a folder per batch, as the kit's: one shared by batches is rebuilt at each
            "trt_engine_cache_path": str(cache_dir() / "tensorrt" / "peer-ort" / f"batch-{batch}"),
        }
        session = ort.InferenceSession(
            str(model.onnx_path),
            providers=[("TensorrtExecutionProvider", options), "CUDAExecutionProvider"],
        )
        if session.get_providers()[0] != "TensorrtExecutionProvider":
            raise RuntimeError(
                f"ONNX Runtime fell back to {session.get_providers()}: not a TensorRT peer"
            )
        self.call = lambda: session.run(None, inputs)
        self.description = {
            "how": "plain ONNX Runtime, TensorRT provider fp16 with its engine cache, session.run "
            "with host arrays per call",
            "onnxruntime": ort.__version__,
            "precision": "fp16",
        }


class TrtArm(LoopArm):
    def __init__(self, model, batch: int, device: str = "cuda"):
        import tensorrt as trt
        import torch

        from kit.backends.tensorrt_backend import graph_for, typing_of

        self.batch, inputs = batch, model.make_inputs(batch)
        logger = trt.Logger(trt.Logger.WARNING)
        builder = trt.Builder(logger)
        network = builder.create_network(0)
        parser = trt.OnnxParser(network, logger)
        typing = typing_of(trt)  # TensorRT 11: no FP16 flag, a user builds from an fp16 graph
        if not parser.parse_from_file(str(graph_for(model, "fp16", typing))):
            raise RuntimeError(f"TensorRT's parser refused the model: {parser.get_error(0)}")
        config = builder.create_builder_config()
        if typing == "weak":
            config.set_flag(trt.BuilderFlag.FP16)
        profile = builder.create_optimization_profile()
        for name, value in inputs.items():
            profile.set_shape(name, value.shape, value.shape, value.shape)
        config.add_optimization_profile(profile)
        engine = trt.Runtime(logger).deserialize_cuda_engine(
            builder.build_serialized_network(network, config)
        )
        context, self.stream = engine.create_execution_context(), torch.cuda.Stream(device)
        self.host_in = [
            torch.from_numpy(np.ascontiguousarray(v)).pin_memory() for v in inputs.values()
        ]
        self.dev_in = [torch.empty_like(h, device=device) for h in self.host_in]
        for name, d in zip(inputs, self.dev_in, strict=True):
            context.set_input_shape(name, tuple(d.shape))
            context.set_tensor_address(name, d.data_ptr())
        names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
        outs = [n for n in names if n not in inputs]
        self.dev_out = [
            torch.empty(tuple(context.get_tensor_shape(n)), device=device) for n in outs
        ]
        self.host_out = [torch.empty(d.shape).pin_memory() for d in self.dev_out]
        for name, d in zip(outs, self.dev_out, strict=True):
            context.set_tensor_address(name, d.data_ptr())
        self.context = context
        self.description = {
            "how": "plain TensorRT Python API: fp16 engine ("
            + ("FP16 flag" if typing == "weak" else "strongly typed, from the fp16 ONNX graph")
            + "), execute_async_v3 between pinned copies",
            "tensorrt": trt.__version__,
            "precision": "fp16",
        }

    def call(self) -> list:
        import torch

        with torch.cuda.stream(self.stream):
            for d, h in zip(self.dev_in, self.host_in, strict=True):
                d.copy_(h, non_blocking=True)
            if not self.context.execute_async_v3(self.stream.cuda_stream):
                # TensorRT returns False and logs why: a call that ran nothing would be fast
                raise RuntimeError("TensorRT execute_async_v3 failed (see TensorRT's log above)")
            for h, d in zip(self.host_out, self.dev_out, strict=True):
                h.copy_(d, non_blocking=True)
        self.stream.synchronize()
        return self.host_out

    def outputs(self) -> list[np.ndarray]:
        return [o.numpy().copy() for o in self.call()]


def make_gpu_arm(arm: str, model, batch: int, device: str = "cuda"):
    if arm in TORCH_ARMS:
        return TorchGpuArm(model, batch, arm, device)
    if arm == "ort-trt-fp16":
        return OrtTrtArm(model, batch)
    return TrtArm(model, batch, device)
