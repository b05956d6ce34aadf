"""`make lab`: JupyterLab on notebooks/ with the project's kernel, wherever a researcher runs it.

As root (PopRT and most lab/cloud containers) it adds `--allow-root`; with no display, or over
SSH, it opens no browser and prints the URL and the SSH tunnel command instead. `LAB_IP` and
`LAB_PORT` (Makefile variables, or --ip/--port) choose the bind address and port.

>>> lab_command(LabOptions(port=9000, uid=0, browser=False), bin_dir=Path("v/bin"))[-3:]
['--allow-root', '--no-browser', '--ServerApp.port_retries=0']
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path

from kit.errors import InvalidParameter, KitError
from kit.paths import notebooks_dir

KERNEL = "ipu-repro"
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def has_display(env: dict | None = None, platform: str = sys.platform) -> bool:
    """Whether a browser can open here: macOS/Windows always, Linux with X11 or Wayland, never
    inside an SSH session (the browser would open on the remote host, if at all)."""
    env = os.environ if env is None else env
    if env.get("SSH_CONNECTION") or env.get("SSH_TTY"):
        return False
    if platform == "darwin" or platform.startswith("win"):
        return True
    return bool(env.get("DISPLAY") or env.get("WAYLAND_DISPLAY"))


@dataclass(frozen=True)
class LabOptions:
    """Where JupyterLab listens and how it starts; validated on creation."""

    ip: str = "127.0.0.1"
    port: int = 8888
    uid: int = field(default_factory=os.geteuid)
    browser: bool = field(default_factory=has_display)
    root_dir: Path = field(default_factory=notebooks_dir)

    def __post_init__(self) -> None:
        if not self.ip:
            raise InvalidParameter("LAB_IP", self.ip, "an address to bind, e.g. 127.0.0.1 or 0.0.0.0")
        if not 1 <= self.port <= 65535:
            raise InvalidParameter("LAB_PORT", self.port, "a TCP port between 1 and 65535")


def lab_command(opts: LabOptions, bin_dir: Path | None = None) -> list[str]:
    """The `jupyter lab` command line for `opts` (the venv's jupyter, next to this Python)."""
    jupyter = str((bin_dir or Path(sys.executable).parent) / "jupyter")
    cmd = [jupyter, "lab", f"--ServerApp.root_dir={opts.root_dir}", f"--ip={opts.ip}",
           f"--port={opts.port}", f"--MappingKernelManager.default_kernel_name={KERNEL}"]
    if opts.uid == 0:
        cmd.append("--allow-root")
    if not opts.browser:
        cmd.append("--no-browser")
    cmd.append("--ServerApp.port_retries=0")  # the printed URL and tunnel must name the real port
    return cmd


def tunnel_hint(opts: LabOptions, user: str | None = None, host: str | None = None) -> str:
    """What to type on your own machine to reach a lab started on this (remote) host."""
    user = user or os.environ.get("USER") or "you"
    host = host or socket.gethostname()
    target = "localhost" if opts.ip in LOOPBACK or opts.ip in ("0.0.0.0", "::") else opts.ip
    return (f"ssh -N -L {opts.port}:{target}:{opts.port} {user}@{host}\n"
            f"then open the http://127.0.0.1:{opts.port}/lab?token=... URL printed below in your browser")


def check_port_free(ip: str, port: int) -> None:
    family = socket.AF_INET6 if ":" in ip else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        try:
            s.bind((ip, port))
        except OSError as exc:
            raise InvalidParameter("LAB_PORT", port, f"a free port on {ip} ({exc.strerror}); "
                                   "e.g. make lab LAB_PORT=8890") from exc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kit.cli.lab", description=__doc__.splitlines()[0])
    parser.add_argument("--ip", default=os.environ.get("LAB_IP", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("LAB_PORT", "8888")))
    parser.add_argument("--print-only", action="store_true", help="print the command, start nothing")
    args = parser.parse_args(argv)
    try:
        opts = LabOptions(ip=args.ip, port=args.port)
        cmd = lab_command(opts)
        if args.print_only:
            print(" ".join(cmd))
            return 0
        check_port_free(opts.ip, opts.port)
    except KitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if opts.uid == 0:
        print("make lab: running as root, so JupyterLab starts with --allow-root", flush=True)
    if not opts.browser:
        print("make lab: no display here (or an SSH session): no browser is opened.\n"
              "On a remote host, forward the port from your own machine:\n  "
              + tunnel_hint(opts).replace("\n", "\n  "), flush=True)
    os.execv(cmd[0], cmd)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
