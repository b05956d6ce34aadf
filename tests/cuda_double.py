"""A double of torch.cuda's streams, pinned memory and CUDA graphs, run on the CPU, that enforces
the capture rules of the real library (CUDA's stream capture as torch.cuda.graph uses it):

- nothing may wait for the GPU while a stream is capturing: `torch.cuda.synchronize`,
  `Stream.synchronize`, `.item()`, `.cpu()`, `.numpy()`, `.tolist()` raise, as CUDA's
  "operation not permitted when stream is capturing" does;
- a host<->device copy in a capture must be asynchronous from pinned memory: a copy touching
  pageable host memory (a tensor made by `torch.from_numpy`, or cast from one on the host), or a
  blocking copy (`non_blocking=False`) to or from pinned memory, raises;
- pinned allocation and the allocator's own changes (`pin_memory`, `empty_cache`) raise in a capture;
- a replay re-runs exactly the captured operations on the captured tensors, so a new input must be
  copied into the captured (static) input buffers before `replay()`, or the replay computes on the
  old one. A graph replays only once captured, and never inside another capture.

Host and device both live in CPU memory here (the session's device is 'cpu'): the double tags
host tensors itself (pageable from `torch.from_numpy`, pinned from `pin_memory`).
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from dataclasses import dataclass, field

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

aten = torch.ops.aten
CAPTURING = "CUDA error: operation not permitted when stream is capturing"
SYNC_OPS = {aten._local_scalar_dense.default}
COPIES = {aten.copy_.default, aten._to_copy.default}
HOST_PROPAGATING = {aten._to_copy.default, aten.clone.default, aten.contiguous.default}


class CaptureError(RuntimeError):
    """What CUDA raises when a capture does something it may not."""


def ptr(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


@dataclass
class FakeCuda:
    pageable: set = field(default_factory=set)  # storage pointers of pageable host tensors
    pinned: set = field(default_factory=set)
    capturing: object = None  # the FakeGraph being captured
    captures: int = 0
    replays: int = 0
    syncs: int = 0
    local: threading.local = field(default_factory=threading.local)

    def refuse_in_capture(self, what: str) -> None:
        if self.capturing is not None:
            raise CaptureError(f"{CAPTURING} ({what})")

    def tag(self, t: torch.Tensor, bucket: set) -> None:
        """Tag `t`'s memory while `t` lives (freed memory may come back as a device tensor)."""
        p = ptr(t)
        bucket.add(p)
        weakref.finalize(t, bucket.discard, p)


def non_blocking(func, args, kwargs) -> bool:
    if func is aten.copy_.default:
        return bool(args[2] if len(args) > 2 else kwargs.get("non_blocking", False))
    return bool(kwargs.get("non_blocking", False))


class HostTagger(TorchDispatchMode):
    """Outside a capture: a tensor cast or cloned on the host from a pageable one is pageable too."""

    def __init__(self, cuda: FakeCuda):
        super().__init__()
        self.cuda = cuda

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if self.cuda.capturing is None and func in HOST_PROPAGATING and isinstance(out, torch.Tensor) \
                and ptr(args[0]) in self.cuda.pageable and not out.is_pinned():
            self.cuda.tag(out, self.cuda.pageable)
        return out


class CaptureMode(TorchDispatchMode):
    """Records every operation of a capture, refusing what CUDA refuses."""

    def __init__(self, cuda: FakeCuda, graph: FakeGraph):
        super().__init__()
        self.cuda, self.graph = cuda, graph

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in SYNC_OPS:
            raise CaptureError(f"{CAPTURING} (.item() waits for the GPU)")
        tensors = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        if any(ptr(t) in self.cuda.pageable for t in tensors):
            raise CaptureError(f"{CAPTURING} ({func}: a copy from pageable host memory is synchronous)")
        if func in COPIES and any(ptr(t) in self.cuda.pinned for t in tensors):
            if not non_blocking(func, args, kwargs):
                raise CaptureError(f"{CAPTURING} (a blocking host<->device copy synchronises)")
        elif any(ptr(t) in self.cuda.pinned for t in tensors):
            raise CaptureError(f"{CAPTURING} ({func} on pinned host memory: only copies may touch it)")
        out = func(*args, **kwargs)
        self.graph.ops.append((func, args, kwargs, out))
        return out


class FakeGraph:
    def __init__(self, cuda: FakeCuda):
        self.cuda, self.ops, self.captured = cuda, [], False

    def replay(self) -> None:
        if not self.captured:
            raise RuntimeError("CUDAGraph::replay called before a capture")
        self.cuda.refuse_in_capture("replay inside a capture")
        self.cuda.replays += 1
        with torch.inference_mode():
            for func, args, kwargs, out in self.ops:
                fresh = func(*args, **kwargs)
                inputs = {ptr(t) for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)}
                for old, new in zip(tree_flatten(out)[0], tree_flatten(fresh)[0], strict=True):
                    # a tensor the capture made (not a view of, or a write into, an input) is the same
                    # memory at every replay: the replay's values land in it
                    if isinstance(old, torch.Tensor) and ptr(old) not in inputs:
                        old.copy_(new)


class FakeStream:
    def __init__(self, cuda: FakeCuda, device=None):
        self.cuda, self.device, self.cuda_stream, self.waits = cuda, device, id(self), 0

    def wait_stream(self, stream) -> None:
        self.waits += 1

    def synchronize(self) -> None:
        self.cuda.refuse_in_capture("Stream.synchronize")
        self.cuda.syncs += 1


def install(monkeypatch: pytest.MonkeyPatch) -> FakeCuda:
    """torch.cuda's streams, graphs and pinned memory replaced by the double (tensors stay on the CPU)."""
    cuda = FakeCuda()
    default = FakeStream(cuda)
    real_from_numpy, real_cpu, real_numpy, real_tolist, real_item = (
        torch.from_numpy, torch.Tensor.cpu, torch.Tensor.numpy, torch.Tensor.tolist, torch.Tensor.item)

    def from_numpy(array):
        t = real_from_numpy(array)
        cuda.tag(t, cuda.pageable)
        return t

    def pin_memory(self, device=None):
        cuda.refuse_in_capture("pinned allocation (cudaHostAlloc)")
        t = self.clone()
        cuda.pageable.discard(ptr(t))
        cuda.tag(t, cuda.pinned)
        return t

    def waiting(real, what):
        def method(self, *args, **kwargs):
            cuda.refuse_in_capture(what)
            return real(self, *args, **kwargs)
        return method

    def synchronize(device=None):
        cuda.refuse_in_capture("torch.cuda.synchronize")
        cuda.syncs += 1

    @contextlib.contextmanager
    def stream(stream):
        before = getattr(cuda.local, "stream", default)
        cuda.local.stream = stream
        try:
            yield
        finally:
            cuda.local.stream = before

    @contextlib.contextmanager
    def graph(cuda_graph, pool=None, stream=None, capture_error_mode="global"):
        if cuda.capturing is not None:
            raise CaptureError("a capture is already under way")
        g = cuda.capturing = cuda_graph
        try:
            with torch.inference_mode(), CaptureMode(cuda, g):
                yield
        finally:
            cuda.capturing = None
        g.captured = True
        cuda.captures += 1

    for name, value in [("from_numpy", from_numpy)]:
        monkeypatch.setattr(torch, name, value)
    for name, value in [("pin_memory", pin_memory), ("is_pinned", lambda self, device=None: ptr(self) in cuda.pinned),
                        ("cpu", waiting(real_cpu, ".cpu() copies to pageable memory and waits")),
                        ("numpy", waiting(real_numpy, ".numpy() reads the host")),
                        ("tolist", waiting(real_tolist, ".tolist() waits")),
                        ("item", waiting(real_item, ".item() waits for the GPU"))]:
        monkeypatch.setattr(torch.Tensor, name, value)
    for name, value in [("is_available", lambda: True), ("synchronize", synchronize),
                        ("Stream", lambda device=None, priority=0: FakeStream(cuda, device)),
                        ("stream", stream), ("current_stream", lambda device=None: getattr(cuda.local, "stream", default)),
                        ("CUDAGraph", lambda: FakeGraph(cuda)), ("graph", graph),
                        ("empty_cache", lambda: cuda.refuse_in_capture("empty_cache changes the allocator"))]:
        monkeypatch.setattr(torch.cuda, name, value)
    tagger = HostTagger(cuda)
    tagger.__enter__()
    monkeypatch.setattr(cuda, "tagger", tagger, raising=False)
    return cuda


def uninstall(cuda: FakeCuda) -> None:
    cuda.tagger.__exit__(None, None, None)
