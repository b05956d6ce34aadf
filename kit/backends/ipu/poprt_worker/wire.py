"""Frames between the kit and the worker: a little-endian header (head length u64, buffer count
u32), the buffer lengths (u64 each), a pickle (protocol 5) whose numpy arrays travel out of band as
raw buffers (no base64, no JSON). Arrays are sent as (dtype, shape, buffer) so either side's numpy
version can read them."""

import pickle
import struct

import numpy as np

_ARRAY = "__kit_ndarray__"
_HEADER = struct.Struct("<QI")


def _pack(obj):
    if isinstance(obj, np.ndarray):
        array = np.ascontiguousarray(obj)
        return (_ARRAY, array.dtype.str, list(array.shape), pickle.PickleBuffer(array))
    if isinstance(obj, dict):
        return {k: _pack(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_pack(v) for v in obj)
    return obj


def _unpack(obj):
    if isinstance(obj, tuple) and len(obj) == 4 and obj[0] == _ARRAY:
        return np.frombuffer(obj[3], dtype=np.dtype(obj[1])).reshape(obj[2])
    if isinstance(obj, dict):
        return {k: _unpack(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_unpack(v) for v in obj)
    return obj


def write_message(stream, obj):
    """Frame and write one message; arrays go as raw out-of-band buffers."""
    buffers = []
    head = pickle.dumps(_pack(obj), protocol=5, buffer_callback=buffers.append)
    raws = [b.raw() for b in buffers]
    parts = [_HEADER.pack(len(head), len(raws))]
    parts += [struct.pack("<Q", r.nbytes) for r in raws]
    stream.write(b"".join(parts) + head)
    for raw in raws:
        stream.write(raw)
    stream.flush()


def _read_exact(stream, size):
    buf = bytearray(size)
    view = memoryview(buf)
    got = 0
    while got < size:
        n = stream.readinto(view[got:])
        if not n:
            raise EOFError(f"the other side closed the pipe after {got} of {size} bytes")
        got += n
    return buf


def read_message(stream):
    """Read one framed message (EOFError when the other side has gone)."""
    head_size, count = _HEADER.unpack(_read_exact(stream, _HEADER.size))
    sizes = struct.unpack(f"<{count}Q", _read_exact(stream, 8 * count)) if count else ()
    head = _read_exact(stream, head_size)
    buffers = [_read_exact(stream, size) for size in sizes]
    return _unpack(pickle.loads(head, buffers=buffers))
