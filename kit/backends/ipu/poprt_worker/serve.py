"""The request loop: one framed request in, one framed reply out, until close or EOF."""

import os
import sys
import traceback

from .session import RunnerHost
from .wire import read_message, write_message

OPS = {
    "probe": RunnerHost.probe,
    "load": RunnerHost.load,
    "run": RunnerHost.run,
    "measure": RunnerHost.measure,
    "close": RunnerHost.close,
}


def serve(requests, replies):
    session = RunnerHost()
    while True:
        try:
            msg = read_message(requests)
        except EOFError:
            return 0
        op = msg.get("op")
        try:
            if op not in OPS:
                raise ValueError(f"unknown op {op!r}; known: {sorted(OPS)}")
            reply = {"ok": True, "result": OPS[op](session, msg)}
        except Exception as exc:  # noqa: BLE001 - the kit raises it with this message
            reply = {
                "ok": False,
                "error": f"{type(exc).__name__}: {exc}",
                "traceback": traceback.format_exc(limit=8),
            }
        write_message(replies, reply)
        if op == "close":
            return 0


def main(argv):
    if len(argv) != 2 or argv[1] != "--serve":
        sys.stderr.write("usage: python3 <the poprt_worker folder> --serve\n")
        return 2
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything PopRT prints goes to stderr, never into the reply stream
    requests = os.fdopen(os.dup(0), "rb")
    return serve(requests, replies)
