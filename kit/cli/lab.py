"""`make lab`: JupyterLab on notebooks/ with the project's kernel, wherever a researcher runs it.

As root (PopRT and most lab/cloud containers) it adds `--allow-root`; with no display, or over
SSH, it opens no browser and prints the URL and the SSH tunnel command instead. `LAB_IP` and
`LAB_PORT` (Makefile variables, or --ip/--port) choose the bind address and port. Where HOME
cannot be written (a read-only home in a container), Jupyter's own files go to a temporary folder.

>>> lab_command(LabOptions(port=9000, uid=0, browser=False), bin_dir=Path("v/bin"))[-3:]
['--allow-root', '--no-browser', '--ServerApp.port_retries=0']
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import stat
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from jupyter_core.paths import jupyter_config_dir, jupyter_data_dir, jupyter_runtime_dir

from kit.cli.main import printable_anywhere
from kit.errors import InvalidParameter, KitError
from kit.paths import notebooks_dir

KERNEL = "ipu-repro"
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def has_display(env: Mapping[str, str] | None = None, platform: str = sys.platform) -> bool:
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
            raise InvalidParameter(
                "LAB_IP", self.ip, "an address to bind, e.g. 127.0.0.1 or 0.0.0.0"
            )
        if not 1 <= self.port <= 65535:
            raise InvalidParameter("LAB_PORT", self.port, "a TCP port between 1 and 65535")


def lab_command(opts: LabOptions, bin_dir: Path | None = None) -> list[str]:
    """The `jupyter lab` command line for `opts` (the venv's jupyter, next to this Python)."""
    jupyter = str((bin_dir or Path(sys.executable).parent) / "jupyter")
    cmd = [
        jupyter,
        "lab",
        f"--ServerApp.root_dir={opts.root_dir}",
        f"--ip={opts.ip}",
        f"--port={opts.port}",
        f"--MappingKernelManager.default_kernel_name={KERNEL}",
    ]
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
    return (
        f"ssh -N -L {opts.port}:{target}:{opts.port} {user}@{host}\n"
        f"then open the http://127.0.0.1:{opts.port}/lab?token=... URL printed below in your "
        "browser"
    )


def check_port_free(ip: str, port: int) -> None:
    family = socket.AF_INET6 if ":" in ip else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        try:
            s.bind((ip, port))
        except OSError as exc:
            raise InvalidParameter(
                "LAB_PORT",
                port,
                f"a free port on {ip} ({exc.strerror}); e.g. make lab LAB_PORT=8890",
            ) from exc


def jupyter_dirs() -> dict[str, Path]:
    """Where JupyterLab, its server and the IPython kernel write, by the variable that moves
    each."""
    config, env = Path(jupyter_config_dir()), os.environ
    return {
        "JUPYTER_RUNTIME_DIR": Path(jupyter_runtime_dir()),
        "JUPYTER_DATA_DIR": Path(jupyter_data_dir()),
        "JUPYTERLAB_SETTINGS_DIR": Path(
            env.get("JUPYTERLAB_SETTINGS_DIR") or config / "lab" / "user-settings"
        ),
        "JUPYTERLAB_WORKSPACES_DIR": Path(
            env.get("JUPYTERLAB_WORKSPACES_DIR") or config / "lab" / "workspaces"
        ),
        "IPYTHONDIR": Path(env.get("IPYTHONDIR") or Path.home() / ".ipython"),
    }


def writable(path: Path) -> bool:
    """Whether this user can create `path` (or write in it): its nearest existing folder is
    writable."""
    while not path.exists():
        if path.parent == path:
            return False
        path = path.parent
    return path.is_dir() and os.access(path, os.W_OK | os.X_OK)


def scratch_dir() -> Path:
    """One folder per user under the temporary folder, the same at every start (a new one each time
    piled up); a fresh private one where that name is taken by someone else or is a link."""
    path = Path(tempfile.gettempdir()) / f"kit-lab-{os.getuid()}"
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700)
    info = os.lstat(path)
    if stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and info.st_mode & 0o077 == 0:
        return path
    return Path(tempfile.mkdtemp(prefix="kit-lab-"))


def jupyter_moves(scratch: Callable[[], Path] | None = None) -> tuple[dict[str, str], str]:
    """The variables that move each Jupyter folder this user cannot write under one scratch
    folder, and the line that says so ({}, '' when all are writable). A folder the user chose (its
    variable set) is an error rather than moved: they meant it."""
    blocked = {var: path for var, path in jupyter_dirs().items() if not writable(path)}
    if not blocked:
        return {}, ""
    if chosen := [var for var in blocked if os.environ.get(var)]:
        raise InvalidParameter(
            chosen[0], os.environ[chosen[0]], "a folder this user can write (Jupyter writes there)"
        )
    try:
        base = (scratch or scratch_dir)()
    except OSError as exc:
        raise KitError(
            f"cannot write {', '.join(map(str, blocked.values()))} nor a temporary folder "
            f"({exc.strerror}): set {', '.join(blocked)} to folders you can write"
        ) from None
    home = Path.home()
    where = (
        f"HOME ({home})"
        if all(p.is_relative_to(home) for p in blocked.values())
        else ", ".join(map(str, blocked.values()))
    )
    note = (
        f"make lab: cannot write in {where}: Jupyter writes its files under {base} instead "
        f"(set {', '.join(blocked)} to choose)"
    )
    return {var: str(base / var.lower()) for var in blocked}, note


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kit.cli.lab", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--ip", default=os.environ.get("LAB_IP", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("LAB_PORT", "8888")))
    parser.add_argument(
        "--print-only", action="store_true", help="print the command, start nothing"
    )
    printable_anywhere()  # the folders it names may hold what an ASCII locale cannot print
    args = parser.parse_args(argv)
    try:
        opts = LabOptions(ip=args.ip, port=args.port)
        cmd = lab_command(opts)
        if args.print_only:
            print(" ".join(cmd))
            return 0
        check_port_free(opts.ip, opts.port)
        moved, note = jupyter_moves()
    except KitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if note:
        print(note, flush=True)
    if opts.uid == 0:
        print("make lab: running as root, so JupyterLab starts with --allow-root", flush=True)
    if not opts.browser:
        print(
            "make lab: no display here (or an SSH session): no browser is opened.\n"
            "On a remote host, forward the port from your own machine:\n  "
            + tunnel_hint(opts).replace("\n", "\n  "),
            flush=True,
        )
    os.execve(cmd[0], cmd, {**os.environ, **moved})
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
