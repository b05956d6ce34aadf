"""The `kit` command line. Each command lives in a module of its own in kit/cli/.

A command module exposes `register(subparsers)`, adding its parser with `func` set to a function
taking the parsed args and returning an exit code.
"""

from __future__ import annotations

import argparse
import codecs
import errno
import importlib
import sys
import unicodedata

from kit.errors import KitError

# Environment errors on files the kit writes: exit 2 with one line, as a usage error.
CANNOT_WRITE = {
    errno.ENOSPC: "free space on that disk, or point KIT_OUTPUTS at another",
    errno.EDQUOT: "free space within your quota, or point KIT_OUTPUTS at another disk",
    errno.EFBIG: "raise the file-size limit (ulimit -f), or point KIT_OUTPUTS at another disk",
    errno.EROFS: "the file system is read-only: point KIT_OUTPUTS at a writable folder",
    errno.EACCES: "make it writable for this user, or point KIT_OUTPUTS at a writable folder",
    errno.EPERM: "make it writable for this user, or point KIT_OUTPUTS at a writable folder",
}

# One line per command module; order is the order of `kit --help`.
COMMAND_MODULES = [
    "kit.cli.models",  # kit models, kit export, kit fetch-weights
    "kit.cli.datasets",  # kit fetch-data, kit datasets
    "kit.cli.reproduce",  # kit reproduce, kit site, kit rebuild-state
    "kit.cli.compare",  # kit compare RUN_A RUN_B
    "kit.cli.rerun",  # kit rerun RESULT.json
    "kit.cli.import_bytemlperf",  # kit import-bytemlperf DIR
    "kit.cli.export_bytemlperf",  # kit export-bytemlperf RESULT.json...
]


# What the kit prints beyond ASCII, as an ASCII terminal (LANG=C, PYTHONUTF8=0) can show it.
ASCII_FOR = {
    "—": "-",
    "–": "-",
    "±": "+/-",
    "×": "x",
    "÷": "/",
    "·": ".",
    "≥": ">=",
    "≤": "<=",
    "…": "...",
    "→": "->",
    "≈": "~",
    "µ": "u",
    "μ": "u",
    "‘": "'",
    "’": "'",
    "“": '"',
    "”": '"',
    "®": "(R)",
    "™": "(TM)",
}


def ascii_look_alike(exc: UnicodeError) -> tuple[str | bytes, int]:
    """Codec error handler: a character the stream cannot encode as its ASCII look-alike (an
    accent dropped, else '?'), so a report printed after its HTML is written never dies on it. A
    byte that came undecoded from the command line (a file name) goes out as it came in."""
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    c = exc.object[exc.start]
    if "\udc80" <= c <= "\udcff":  # surrogateescape: the original byte
        return bytes([ord(c) - 0xDC00]), exc.start + 1
    return ASCII_FOR.get(c) or unicodedata.normalize("NFKD", c).encode(
        "ascii", "ignore"
    ).decode() or "?", exc.start + 1


codecs.register_error("kit-ascii", ascii_look_alike)


def printable_anywhere() -> None:
    """stdout and stderr write what their encoding lacks as ASCII look-alikes, not a traceback."""
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="kit-ascii")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kit", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    printable_anywhere()
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        if exc.errno not in CANNOT_WRITE:
            raise
        where = exc.filename or "a file under outputs/"
        print(
            f"error: cannot write {where}: {exc.strerror}; {CANNOT_WRITE[exc.errno]}",
            file=sys.stderr,
        )
        return 2
    except KeyboardInterrupt:  # Ctrl-C outside a batch (a batch handles its own)
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
