"""Connecting to a Dask scheduler with every failure named and bounded in time.

`distributed.Client(address, timeout=...)` bounds the TCP connect but not the handshake that
follows: an address that accepts connections and never answers hangs it for ever, and a service
that answers with something else (an HTTP server, say) surfaces as a raw MemoryError from the
frame decoder. So the scheduler is asked who it is first, within the timeout.
"""

from __future__ import annotations

import asyncio

from kit.errors import BackendUnavailable

START_IT = "start it with `dask scheduler` (docs/cluster.md)"


def check_scheduler(address: str, timeout_s: float) -> dict:
    """The scheduler's identity; BackendUnavailable naming the address when it cannot be
    reached, does not answer within `timeout_s`, or answers as something else."""
    try:
        identity = asyncio.run(asyncio.wait_for(_identity(address, timeout_s), timeout_s + 2))
    except BackendUnavailable:
        raise
    except TimeoutError:
        raise BackendUnavailable(
            f"{address!r} accepted a connection but sent no Dask handshake within "
            f"{timeout_s + 2:.0f} s: it is not a Dask scheduler, or one that is stuck; "
            f"check the address and port, or {START_IT}"
        ) from None
    if not isinstance(identity, dict) or identity.get("type") != "Scheduler":
        kind = identity.get("type") if isinstance(identity, dict) else type(identity).__name__
        raise BackendUnavailable(
            f"{address!r} answers as a {kind!r}, not a Dask scheduler; give the "
            f"scheduler's address (tcp://HOST:8786), or {START_IT}"
        )
    return identity


async def _identity(address: str, timeout_s: float) -> object:
    from distributed.comm import connect

    try:
        comm = await connect(address, timeout=timeout_s)
    except (OSError, ValueError, TypeError) as exc:  # refused, unreachable, malformed address
        raise BackendUnavailable(
            f"cannot reach the Dask scheduler at {address!r} "
            f"({type(exc).__name__}: {exc}); {START_IT}"
        ) from None
    except Exception as exc:  # noqa: BLE001 - anything the handshake decoder raises
        raise _not_dask(address, exc) from None
    try:
        await comm.write({"op": "identity", "reply": True})
        return await comm.read()
    except Exception as exc:  # noqa: BLE001 - a peer speaking another protocol
        raise _not_dask(address, exc) from None
    finally:
        comm.abort()


def _not_dask(address: str, exc: Exception) -> BackendUnavailable:
    # another protocol's bytes read as a Dask frame header give an absurd length (MemoryError)
    why = (
        "its reply is not Dask's protocol"
        if isinstance(exc, MemoryError)
        else f"{type(exc).__name__}: {str(exc)[:120]}"
    )
    return BackendUnavailable(
        f"{address!r} answered, but not as a Dask scheduler ({why}); give the "
        f"scheduler's address (tcp://HOST:8786), or {START_IT}"
    )
