"""PyTorch's host-to-host call on a CUDA GPU, in the two forms GPU users run it.

- `StreamCall` (eager or torch.compile): pinned host inputs in the model's input dtype (fp16
  weights take fp16 inputs: no cast kernel per call), non-blocking copies in, the model,
  non-blocking copies out into pinned output buffers allocated once (at construction, by one warm-up
  call), then this client's own CUDA stream is synchronised (clients overlap each other).
- `GraphCall`: the same steps captured once in one CUDA graph (`torch.cuda.graph`): the copies in,
  the model and the copies out into pinned output buffers; a call replays the graph on this
  client's stream and synchronises it. A replay reuses the captured buffers, so new inputs are
  copied into the pinned input buffers first (`load`).

A session keeps one of these per (input shapes, client) for its life (kit.backends.torch_backend):
every timed window replays the graph captured before it and writes into the same pinned buffers.

Both are host to host, as ByteMLPerf and PopRT time: inputs from host memory, outputs back in host
memory, the call over when they are there. torch is imported inside the functions (optional heavy
library).
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

# eager calls on the side stream before capture (cuDNN's algorithm search, the allocator)
CAPTURE_WARMUP = 3


def host_tensors(arrays: list, dtype) -> list:
    """Each numpy input as a host tensor; floating inputs cast to `dtype` (the weights' dtype, or
    None to keep them) on the host."""
    import numpy as np
    import torch

    tensors = [torch.from_numpy(np.ascontiguousarray(a)) for a in arrays]
    if dtype is not None:
        tensors = [t.to(dtype) if t.is_floating_point() else t for t in tensors]
    return tensors


def pinned_host_inputs(arrays: list, dtype) -> list:
    """`host_tensors` in pinned memory (what a non-blocking copy in needs), made once per call
    object."""
    return [t.pin_memory() for t in host_tensors(arrays, dtype)]


def load_pinned(pinned: list, host_inputs: list) -> None:
    """New inputs into a call's pinned input buffers (what its next call copies in)."""
    for buffer, new in zip(pinned, host_inputs, strict=True):
        if buffer is not new:
            buffer.copy_(new)


class StreamCall:
    """Eager (or compiled) host to host on this client's own stream, into pinned outputs made
    once."""

    def __init__(self, forward: Callable[[list], list], host_inputs: list, device: str):
        import torch

        self.forward, self.host_inputs, self.device = forward, host_inputs, device
        self.stream = torch.cuda.Stream(device)
        self.stream.wait_stream(torch.cuda.current_stream(device))  # the weights' copies, if queued
        with torch.cuda.stream(self.stream):  # one call to learn the outputs' shapes and dtypes
            outputs = self.forward([h.to(self.device, non_blocking=True) for h in self.host_inputs])
        self.stream.synchronize()
        self.host_outputs = [torch.empty(o.shape, dtype=o.dtype).pin_memory() for o in outputs]

    def load(self, host_inputs: list) -> None:
        load_pinned(self.host_inputs, host_inputs)

    def __call__(self) -> list:
        import torch

        with torch.cuda.stream(self.stream):
            on_device = [h.to(self.device, non_blocking=True) for h in self.host_inputs]
            for host, out in zip(self.host_outputs, self.forward(on_device), strict=True):
                host.copy_(out, non_blocking=True)
        self.stream.synchronize()  # the copies out are asynchronous: the call ends when they land
        return self.host_outputs


class GraphCall:
    """The host-to-host call captured in one CUDA graph, replayed per call on this client's
    stream."""

    def __init__(self, forward: Callable[[list], list], host_inputs: list, device: str):
        import torch

        self.device, self.host_inputs = device, host_inputs
        self.stream = torch.cuda.Stream(device)
        self.static_inputs = [torch.empty_like(h, device=device) for h in host_inputs]
        outputs = self.warm_up(forward)
        # pinned allocation is not allowed inside a capture: the output buffers are made before it
        self.host_outputs = [torch.empty(o.shape, dtype=o.dtype).pin_memory() for o in outputs]
        self.graph = torch.cuda.CUDAGraph()
        self.capture(forward)

    def capture(self, forward: Callable[[list], list]) -> None:
        def copies_and_model() -> None:
            self.copy_in()
            for host, out in zip(self.host_outputs, forward(self.static_inputs), strict=True):
                host.copy_(out, non_blocking=True)

        capture(self.graph, self.stream, self.device, copies_and_model)

    def warm_up(self, forward: Callable[[list], list]) -> list:
        """Eager calls on the side stream, as torch asks before a capture; returns the last
        outputs."""

        def copies_and_model() -> list:
            self.copy_in()
            return forward(self.static_inputs)

        return warm_up(self.stream, self.device, copies_and_model)

    def copy_in(self) -> None:
        for static, host in zip(self.static_inputs, self.host_inputs, strict=True):
            static.copy_(host, non_blocking=True)

    def load(self, host_inputs: list) -> None:
        """New inputs into the captured pinned buffers (the graph reads only those)."""
        load_pinned(self.host_inputs, host_inputs)

    def __call__(self) -> list:
        import torch

        with torch.cuda.stream(self.stream):
            self.graph.replay()
        self.stream.synchronize()
        return self.host_outputs


def warm_up(stream, device: str, body: Callable[[], T]) -> T:
    """`body` run CAPTURE_WARMUP times on `stream` (after the work queued on the current one),
    as torch asks before a capture on it; returns the last call's result once it has landed."""
    import torch

    stream.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(stream):
        for _ in range(CAPTURE_WARMUP):
            result = body()
    stream.synchronize()
    return result


def capture(graph, stream, device: str, body: Callable[[], object]) -> None:
    """`body` captured into `graph` on `stream`. When it does what a capture refuses,
    torch.cuda.graph's exit still ends the capture, CUDA refuses the invalidated capture, and that
    error (no frame of the model's) replaces the body's own and skips leaving the capture stream:
    the body's error is raised instead, with this thread back on the stream it was on."""
    import torch

    before, refused = torch.cuda.current_stream(device), None
    try:
        with torch.cuda.graph(graph, stream=stream):
            try:
                body()
            except BaseException as exc:
                refused = exc
                raise
    except BaseException:
        torch.cuda.set_stream(before)
        if refused is None:
            raise
        raise refused from None


def culprit(exc: BaseException) -> str:
    """Where a model did what a capture refused: the innermost frame of `exc`'s traceback outside
    torch (CUDA raises inside it) and outside frames that hide themselves (`__tracebackhide__`, as
    test doubles standing for torch do), as 'file:line function'."""
    import torch

    torch_dir = str(Path(torch.__file__).parent)
    for frame, line in reversed(list(traceback.walk_tb(exc.__traceback__))):
        code = frame.f_code
        if (
            not code.co_filename.startswith(torch_dir)
            and not frame.f_globals.get("__tracebackhide__")
            and not frame.f_locals.get("__tracebackhide__")
        ):
            return f"{code.co_filename}:{line} {code.co_name}"
    return "no frame outside torch"
