"""Project paths, all relative to the repository root (override with KIT_ROOT), and the two
rules for a name read from a file (a result, the state) that becomes a path: it is a plain name
(`plain_name`), and what is written under it stays inside its folder (`inside`)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from kit.errors import InvalidParameter, MissingResource

# A job, notebook, study, backend or model name as a file or folder name: no separator, no leading
# dot.
PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,199}")
PLAIN_RULE = "a plain name (letters, digits and . _ - @ +, not starting with a dot), no folder"


def project_root() -> Path:
    env = os.environ.get("KIT_ROOT")
    if env:
        return Path(env)
    here = Path(__file__).resolve().parent.parent
    return here if (here / "pyproject.toml").exists() else Path.cwd()


def outputs_dir() -> Path:
    return Path(os.environ.get("KIT_OUTPUTS", project_root() / "outputs"))


def cache_dir() -> Path:
    return Path(os.environ.get("KIT_CACHE", outputs_dir() / "cache"))


def data_dir() -> Path:
    return project_root() / "data"


def published_dir() -> Path:
    return data_dir() / "published"


def weights_dir(model: str) -> Path:
    return data_dir() / "weights" / model


def datasets_dir() -> Path:
    return data_dir() / "datasets"


def imported_reports_dir(outputs: Path | None = None) -> Path:
    """Where `kit import-bytemlperf` keeps other vendors' ByteMLPerf reports (the scorecard reads
    them)."""
    return (outputs or outputs_dir()) / "imported" / "bytemlperf"


def notebooks_dir() -> Path:
    return Path(os.environ.get("KIT_NOTEBOOKS", project_root() / "notebooks"))


def plain_name(value: object, what: str) -> str:
    """`value` when it is a plain name, else InvalidParameter naming it and the rule.

    >>> plain_name("resnet50-torch-fp32_FP16@cuda", "job name")
    'resnet50-torch-fp32_FP16@cuda'
    """
    if not isinstance(value, str) or not PLAIN_NAME.fullmatch(value):
        raise InvalidParameter(what, value, PLAIN_RULE)
    return value


def inside(folder: Path, relative: str | Path) -> Path:
    """`folder / relative`, refused (InvalidParameter) when it would lead outside `folder`
    (an absolute path, `..`, a link out): every write of a batch goes through here.

    >>> inside(Path("/out/runs/1"), "job.json").as_posix()
    '/out/runs/1/job.json'
    """
    path = Path(folder) / relative
    if not path.resolve().is_relative_to(Path(folder).resolve()):
        raise InvalidParameter("path", str(relative), f"a path inside {folder}")
    return path


def output_file(given: str | Path, default_name: str) -> Path:
    """The file a command writes for its `--out`: `given`, or `default_name` inside it where it is
    a folder (one that exists, or a path ending in a separator); its folder made. Refused
    (InvalidParameter) up front where the folder cannot be made, so no run measures for minutes
    and then fails to write.

    >>> output_file("/tmp/", "peers.json").as_posix()
    '/tmp/peers.json'
    """
    text = os.fspath(given)
    path = Path(text).expanduser()
    if path.is_dir() or text.endswith((os.sep, "/")):
        path = path / default_name
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InvalidParameter(
            "--out",
            text,
            f"a file, or a folder to write {default_name} in (cannot make the folder "
            f"{path.parent}: {exc.strerror})",
        ) from exc
    if path.is_dir():
        raise InvalidParameter("--out", text, f"a file, or a folder to write {default_name} in")
    return path


def project_notebook(name: str) -> Path:
    """notebooks/<name>, one of the project's own notebooks; MissingResource (naming the value and
    the notebooks there) for any other name, a path, or a notebook that is not there."""
    known = sorted(p.name for p in notebooks_dir().glob("*.ipynb"))
    if name not in known:
        raise MissingResource(
            f"notebook {name!r} is not one of the project's notebooks in "
            f"{notebooks_dir()}: {', '.join(known) or '(none)'}"
        )
    return notebooks_dir() / name
