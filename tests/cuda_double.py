"""A double of torch.cuda's streams, pinned memory and CUDA graphs, run on the CPU, that enforces
the capture rules of the real library (CUDA's stream capture as torch.cuda.graph uses it):

- nothing may wait for the GPU while a stream is capturing: `torch.cuda.synchronize`,
  `Stream.synchronize`, `.item()`, `.cpu()`, `.numpy()`, `.tolist()` raise, as CUDA's
  "operation not permitted when stream is capturing" does;
- a host<->device copy in a capture must be asynchronous from pinned memory: a copy touching
  pageable host memory (a tensor made by `torch.from_numpy`, or cast from one on the host), or a
  blocking copy (`non_blocking=False`) to or from pinned memory, raises;
- a device value read on the host (`is_nonzero` as in `if t.all():`, `item`, `_local_scalar_dense`,
  `equal`, `nonzero` and a boolean-mask index) raises; outside a capture each such read is counted
  (`reads`: a round trip every eager call);
- a tensor made from Python data (`torch.tensor`, `torch.as_tensor`) is host memory: made on the
  device (`device=`) it is a copy from pageable memory and raises; on the host it may enter a device
  op only as a 0-dim scalar (CUDA reads those on the host at launch), and never as an index;
- pinned allocation and the allocator's own changes (`pin_memory`, `empty_cache`) raise in a
  capture;
- `torch.cuda.is_current_stream_capturing()` says whether a capture is under way, as transformers
  asks;
- a capture runs on its stream (`torch.cuda.graph(stream=...)`, else one of its own), and a body
  that raises ends as the real one does: capture_end still runs, CUDA refuses the invalidated
  capture ("operation failed due to a previous error during capture"), that error replaces the
  body's (kept as its `__context__`), and the capture stream stays the current one.

Its frames hide themselves (`__tracebackhide__`), so a refusal is traced to the model's code, as a
real CUDA error raised inside torch is.
- a replay re-runs exactly the captured operations on the captured tensors, so a new input must be
  copied into the captured (static) input buffers before `replay()`, or the replay computes on the
  old one. A graph replays only once captured, and never inside another capture.

Host and device both live in CPU memory here (the session's device is 'cpu'): the double tags
host tensors itself (pageable from `torch.from_numpy` and Python data, pinned from `pin_memory`), so
a device given as `device=` is the GPU's, and `.to(device)` of a host tensor (a no-op here) is not
seen.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections import Counter
from dataclasses import dataclass, field

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

aten = torch.ops.aten
CAPTURING = "CUDA error: operation not permitted when stream is capturing"
INVALIDATED = "CUDA error: operation failed due to a previous error during capture"
#: ops that read a device value on the host (the call waits for the GPU)
SYNC_OPS = {
    aten._local_scalar_dense.default,
    aten.item.default,
    aten.is_nonzero.default,
    aten.equal.default,
    aten.nonzero.default,
}
COPIES = {aten.copy_.default, aten._to_copy.default}
HOST_PROPAGATING = {aten._to_copy.default, aten.clone.default, aten.contiguous.default}
INDEXING = {
    aten.index.Tensor,
    aten.index_put.default,
    aten.index_put_.default,
    aten._index_put_impl_.default,
}
# a refusal stands for an error raised inside torch: kit.backends.torch_cuda.culprit (which names
# the frame that caused it) skips this module's frames as it skips torch's
__tracebackhide__ = True


class CaptureError(RuntimeError):
    """What CUDA raises when a capture does something it may not."""


def refuse(what: str) -> CaptureError:
    return CaptureError(f"{CAPTURING} ({what})")


def ptr(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


class Tags:
    """Storage pointers (or tensor ids) of host memory, held while any tensor tagged with one lives
    (a view made on the host outlives the tensor it was cut from)."""

    def __init__(self):
        self.counts: Counter = Counter()

    def __contains__(self, p: int) -> bool:
        return self.counts[p] > 0

    def add(self, p: int) -> None:
        self.counts[p] += 1

    def release(self, p: int) -> None:
        if self.counts[p] > 0:
            self.counts[p] -= 1

    def discard(self, p: int) -> None:
        self.counts.pop(p, None)


@dataclass
class FakeCuda:
    pageable: Tags = field(default_factory=Tags)  # storage pointers of pageable host tensors
    pinned: Tags = field(default_factory=Tags)
    # host tensors made from Python data, and host math on them, by tensor (module buffers made so
    # at build time swap their memory on `.to()`: a pointer would outlive them)
    data: Tags = field(default_factory=Tags)
    capturing: object = None  # the FakeGraph being captured
    captures: int = 0
    replays: int = 0
    syncs: int = 0
    local: threading.local = field(default_factory=threading.local)

    reads: int = 0  # device values read on the host outside a capture (a round trip each)

    def refuse_in_capture(self, what: str) -> None:
        if self.capturing is not None:
            raise refuse(what)

    def is_host(self, t: torch.Tensor) -> bool:
        return ptr(t) in self.pageable or ptr(t) in self.pinned or id(t) in self.data

    def from_data(self, t: torch.Tensor) -> None:
        self.data.add(id(t))
        weakref.finalize(t, self.data.release, id(t))

    def tag(self, t: torch.Tensor, bucket: Tags) -> None:
        """Tag `t`'s memory while `t` lives (freed memory may come back as a device tensor)."""
        p = ptr(t)
        if not p:  # an empty tensor has no memory (every one's pointer is 0)
            return
        bucket.add(p)
        weakref.finalize(t, bucket.release, p)


def non_blocking(func, args, kwargs) -> bool:
    if func is aten.copy_.default:
        return bool(args[2] if len(args) > 2 else kwargs.get("non_blocking", False))
    return bool(kwargs.get("non_blocking", False))


class HostTagger(TorchDispatchMode):
    """Outside a capture: a tensor cast or cloned on the host from a pageable one is pageable too,
    one made from Python data is host memory, and each device value read on the host is counted."""

    def __init__(self, cuda: FakeCuda):
        super().__init__()
        self.cuda = cuda

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if self.cuda.capturing is not None:
            return out
        tensors = tensors_in(args, kwargs)
        if func in SYNC_OPS and any(not self.cuda.is_host(t) for t in tensors):
            self.cuda.reads += 1
        if func is aten.lift_fresh.default or (
            tensors
            and all(id(t) in self.cuda.data for t in tensors)
            and "device" not in (kwargs or {})
        ):
            for t in tensors_in(out, None):
                self.cuda.from_data(t)
        elif (
            func in HOST_PROPAGATING and ptr(args[0]) in self.cuda.pageable and not out.is_pinned()
        ):
            self.cuda.tag(out, self.cuda.pageable)
        return out


def tensors_in(args, kwargs) -> list[torch.Tensor]:
    return [t for t in tree_flatten((args, kwargs or {}))[0] if isinstance(t, torch.Tensor)]


class CaptureMode(TorchDispatchMode):
    """Records every operation of a capture, refusing what CUDA refuses."""

    def __init__(self, cuda: FakeCuda, graph: FakeGraph):
        super().__init__()
        self.cuda, self.graph = cuda, graph

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        tensors = tensors_in(args, kwargs)
        on_device = [t for t in tensors if not self.cuda.is_host(t)]
        if func in SYNC_OPS and on_device:
            raise refuse(f"{func} reads a device value on the host: it waits for the GPU")
        if func is aten.lift_fresh.default or (
            tensors and not on_device and "device" not in kwargs
        ):
            return self.on_host(func, args, kwargs)  # host work at capture time, not in the graph
        self.check_index(func, args)
        self.check_host_memory(func, args, kwargs, tensors)
        out = func(*args, **kwargs)
        self.graph.ops.append((func, args, kwargs, out))
        return out

    def on_host(self, func, args, kwargs):
        out = func(*args, **kwargs)
        for t in tensors_in(out, None):
            self.cuda.tag(t, self.cuda.pinned if ptr(t) in self.cuda.pinned else self.cuda.pageable)
        return out

    def check_index(self, func, args) -> None:
        if func not in INDEXING or self.cuda.is_host(args[0]):
            return
        indices = [i for i in args[1] if i is not None]
        if any(self.cuda.is_host(i) for i in indices):
            raise refuse(
                f"{func}: a host index into a device tensor is copied from pageable memory"
            )
        if any(i.dtype in (torch.bool, torch.uint8) for i in indices):
            raise refuse(f"{func}: a boolean mask index reads its count back (nonzero)")

    def check_host_memory(self, func, args, kwargs, tensors) -> None:
        pageable = [t for t in tensors if ptr(t) in self.cuda.pageable]
        if any(t.dim() > 0 for t in pageable) or (pageable and func in COPIES):
            raise refuse(f"{func}: a copy from pageable host memory is synchronous")
        if func in COPIES and any(ptr(t) in self.cuda.pinned for t in tensors):
            if not non_blocking(func, args, kwargs):
                raise refuse("a blocking host<->device copy synchronises")
        elif any(ptr(t) in self.cuda.pinned for t in tensors):
            raise refuse(f"{func} on pinned host memory: only copies may touch it")


class FakeGraph:
    cuda: FakeCuda  # the installed double's (install sets it)

    def __init__(self, keep_graph: bool = False):
        self.ops, self.captured = [], False

    def replay(self) -> None:
        if not self.captured:
            raise RuntimeError("CUDAGraph::replay called before a capture")
        self.cuda.refuse_in_capture("replay inside a capture")
        self.cuda.replays += 1
        with torch.inference_mode():
            for func, args, kwargs, out in self.ops:
                fresh = func(*args, **kwargs)
                inputs = {
                    ptr(t) for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)
                }
                for old, new in zip(tree_flatten(out)[0], tree_flatten(fresh)[0], strict=True):
                    # a tensor the capture made (not a view of, or a write into, an input) is the
                    # same memory at every replay: the replay's values land in it
                    if isinstance(old, torch.Tensor) and ptr(old) not in inputs:
                        old.copy_(new)


class FakeStream:
    cuda: FakeCuda  # the installed double's (install sets it)

    def __init__(self, device=None, priority=0):
        self.device, self.cuda_stream, self.waits = device, id(self), 0

    def wait_stream(self, stream) -> None:
        self.waits += 1

    def synchronize(self) -> None:
        self.cuda.refuse_in_capture("Stream.synchronize")
        self.cuda.syncs += 1


def install(monkeypatch: pytest.MonkeyPatch) -> FakeCuda:
    """torch.cuda's streams, graphs and pinned memory replaced by the double (tensors stay on the
    CPU)."""
    cuda = FakeCuda()
    # classes, not factories: transformers annotates with `torch.cuda.Stream | None` at import
    for cls in (FakeGraph, FakeStream):
        monkeypatch.setattr(cls, "cuda", cuda, raising=False)
    default, capture_stream = FakeStream(), FakeStream()
    real_from_numpy, real_cpu, real_numpy, real_tolist, real_item, real_tensor, real_as_tensor = (
        torch.from_numpy,
        torch.Tensor.cpu,
        torch.Tensor.numpy,
        torch.Tensor.tolist,
        torch.Tensor.item,
        torch.tensor,
        torch.as_tensor,
    )

    def from_numpy(array):
        t = real_from_numpy(array)
        cuda.tag(t, cuda.pageable)
        return t

    def pin_memory(self, device=None):
        cuda.refuse_in_capture("pinned allocation (cudaHostAlloc)")
        t = self.clone()
        cuda.pageable.discard(ptr(t))
        cuda.data.discard(id(t))
        cuda.tag(t, cuda.pinned)
        return t

    def on_device(t: torch.Tensor, data, device) -> torch.Tensor:
        """Python data copied to `device` (the GPU here): pageable memory, refused in a capture."""
        if device is not None and not isinstance(data, torch.Tensor):
            cuda.pageable.discard(ptr(t))  # it lives on the device; the copy was the problem
            cuda.data.discard(id(t))
        return t

    def refuse_copy_of_data(data, device) -> None:
        if device is not None and not isinstance(data, torch.Tensor):
            cuda.refuse_in_capture(
                f"torch.tensor/as_tensor on {device}: a copy from pageable host memory"
            )

    def tensor(data, *, dtype=None, device=None, requires_grad=False, pin_memory=False):
        refuse_copy_of_data(data, device)
        return on_device(
            real_tensor(
                data, dtype=dtype, device=device, requires_grad=requires_grad, pin_memory=pin_memory
            ),
            data,
            device,
        )

    def as_tensor(data, *, dtype=None, device=None):
        refuse_copy_of_data(data, device)
        return on_device(real_as_tensor(data, dtype=dtype, device=device), data, device)

    def waiting(real, what):
        def method(self, *args, **kwargs):
            if not cuda.is_host(self):
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
        before = getattr(cuda.local, "stream", default)
        cuda.local.stream = stream or capture_stream  # torch.cuda.graph captures on its stream
        g = cuda.capturing = cuda_graph
        try:
            with torch.inference_mode(), CaptureMode(cuda, g):
                yield
        except BaseException:
            # torch.cuda.graph's exit calls capture_end even when the body raised: CUDA then
            # refuses the invalidated capture, that error replaces the body's (now only its
            # __context__), and the stream context is never left
            cuda.capturing = None
            raise CaptureError(INVALIDATED)  # noqa: B904 - what torch raises, chained as torch's
        cuda.capturing = None
        cuda.local.stream = before
        g.captured = True
        cuda.captures += 1

    for name, value in [("from_numpy", from_numpy), ("tensor", tensor), ("as_tensor", as_tensor)]:
        monkeypatch.setattr(torch, name, value)
    for name, value in [
        ("pin_memory", pin_memory),
        ("is_pinned", lambda self, device=None: ptr(self) in cuda.pinned),
        ("cpu", waiting(real_cpu, ".cpu() copies to pageable memory and waits")),
        ("numpy", waiting(real_numpy, ".numpy() reads the host")),
        ("tolist", waiting(real_tolist, ".tolist() waits")),
        ("item", waiting(real_item, ".item() waits for the GPU")),
    ]:
        monkeypatch.setattr(torch.Tensor, name, value)
    for name, value in [
        ("is_available", lambda: True),
        ("synchronize", synchronize),
        ("Stream", FakeStream),
        ("stream", stream),
        ("current_stream", lambda device=None: getattr(cuda.local, "stream", default)),
        ("set_stream", lambda stream: setattr(cuda.local, "stream", stream)),
        ("CUDAGraph", FakeGraph),
        ("graph", graph),
        ("is_current_stream_capturing", lambda: cuda.capturing is not None),
        ("empty_cache", lambda: cuda.refuse_in_capture("empty_cache changes the allocator")),
    ]:
        monkeypatch.setattr(torch.cuda, name, value)
    tagger = HostTagger(cuda)
    tagger.__enter__()
    monkeypatch.setattr(cuda, "tagger", tagger, raising=False)
    return cuda


def uninstall(cuda: FakeCuda) -> None:
    cuda.tagger.__exit__(None, None, None)
