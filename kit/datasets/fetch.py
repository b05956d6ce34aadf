"""`kit fetch-data NAME`: opt-in download of a published dataset into data/datasets/NAME.

Each file is downloaded to a temporary name, its size and checksum are checked against the
pinned values (sha256, or the publisher's md5 where that is all that is published), and only then
is it unpacked. A source with no pinned checksum is accepted with its sha256 printed and
recorded in FETCHED.json, so the next fetch can pin it (`--sha256`). Nothing calls this by default.

Every network read has a timeout (`timeout`, seconds): a server that stops sending is an error,
not a hang. Downloads go to `.fetch-tmp-<pid>-*` folders inside the destination; a fetch that was
killed leaves one behind, and the next fetch removes those whose process is gone.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable
from dataclasses import KW_ONLY, asdict, dataclass, replace
from pathlib import Path

from kit import atomic
from kit.datasets.registry import DATASETS
from kit.errors import CorruptModel, InvalidParameter, KitError, MissingResource
from kit.paths import datasets_dir
from kit.registry import Registry

BYTEMLPERF = "https://lf-bytemlperf.17mh.cn/obj/bytemlperf-zoo"
TMP_PREFIX = ".fetch-tmp-"
DEFAULT_TIMEOUT_S = 60.0


class ChecksumMismatch(KitError):
    """A downloaded file whose size or checksum is not the published one."""


class Unpinned(KitError):
    """A download with no checksum to check it against, not accepted as such by the user."""


@dataclass(frozen=True)
class Source:
    url: str
    filename: str
    _: KW_ONLY
    size: int | None = None
    sha256: str | None = None
    md5: str | None = None
    unpack: bool = False  # tar / tar.gz / zip / .gz archives are extracted
    by_hand: str = ""  # where to get it when there is no download


SOURCES: Registry[tuple[Source, ...]] = Registry("dataset")
SOURCES.register(
    "squad",
    (
        Source(
            "https://rajpurkar.github.io/SQuAD-explorer/dataset/dev-v1.1.json",
            "dev-v1.1.json",
            size=4854279,
        ),
    ),
)
SOURCES.register(
    "cifar100",
    (
        Source(
            "https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz",
            "cifar-100-python.tar.gz",
            size=169001437,
            md5="eb9058c3a382ffc7106e4002c42a8d85",
            unpack=True,
        ),
    ),
)
SOURCES.register(
    "imagenet",
    (
        Source(
            f"{BYTEMLPERF}/open_imagenet.tar",
            "open_imagenet.tar",
            unpack=True,
            by_hand="ILSVRC2012 validation images + val_map.txt (image-net.org, after accepting "
            "its terms)",
        ),
    ),
)
SOURCES.register("criteo", (Source(f"{BYTEMLPERF}/eval.csv", "eval.csv"),))
SOURCES.register(
    "cail2019", (Source(f"{BYTEMLPERF}/open_cail2019.tar", "open_cail2019.tar", unpack=True),)
)


def _digest(path: Path, algorithm: str) -> str:
    h = hashlib.new(algorithm)
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def verify(path: Path, source: Source) -> dict:
    """Check size and checksum; return what was checked. Raises ChecksumMismatch."""
    size = path.stat().st_size
    if source.size is not None and size != source.size:
        raise ChecksumMismatch(
            f"{source.filename}: {size} bytes, expected {source.size} ({source.url})"
        )
    sha = _digest(path, "sha256")
    if source.sha256 and sha != source.sha256.lower():
        raise ChecksumMismatch(f"{source.filename}: sha256 {sha}, expected {source.sha256}")
    if source.md5 and not source.sha256:
        md5 = _digest(path, "md5")
        if md5 != source.md5.lower():
            raise ChecksumMismatch(f"{source.filename}: md5 {md5}, expected {source.md5}")
    pinned = "sha256" if source.sha256 else "md5" if source.md5 else "none"
    return {
        "file": source.filename,
        "url": source.url,
        "bytes": size,
        "sha256": sha,
        "pinned": pinned,
    }


def _strip_single_root(dest: Path) -> None:
    """Archives that hold one top folder (open_cail2019/...) are flattened into dest."""
    entries = list(dest.iterdir())
    if len(entries) == 1 and entries[0].is_dir() and entries[0].name != "cifar-100-python":
        inner = entries[0]
        for item in inner.iterdir():
            shutil.move(str(item), dest / item.name)
        inner.rmdir()


def unpack(archive: Path, dest: Path, filename: str) -> None:
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as z:
            z.extractall(dest)
    elif tarfile.is_tarfile(archive):
        with tarfile.open(archive) as t:
            t.extractall(dest, filter="data")
    elif filename.endswith(".gz"):
        with gzip.open(archive, "rb") as src, open(dest / filename[:-3], "wb") as out:
            shutil.copyfileobj(src, out)
    else:
        raise CorruptModel(f"{filename}: not a zip, tar or gzip archive")


def by_hand_message(name: str, dest: Path, reason: str) -> str:
    layout = DATASETS.get(name).layout if name in DATASETS else ""
    hand = "; ".join(s.by_hand or s.url for s in SOURCES.get(name))
    return (
        f"cannot download {name} ({reason}). Without internet, put the files there by hand: "
        f"{dest} must hold {layout} (from: {hand}); see docs/datasets.md"
    )


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_downloads(dest: Path, log: Callable[[str], None] = print) -> list[Path]:
    """Delete the `.fetch-tmp-<pid>-*` folders in `dest` left by fetches whose process is gone."""
    removed = []
    for folder in sorted(dest.glob(f"{TMP_PREFIX}*")):
        pid = folder.name[len(TMP_PREFIX) :].split("-", 1)[0]
        if (
            folder.is_dir()
            and pid.isdigit()
            and int(pid) != os.getpid()
            and not _pid_alive(int(pid))
        ):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
            log(f"removed {folder.name}, left by an interrupted download")
    return removed


def _validate_timeout(timeout: object) -> float:
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not 0 < timeout < float("inf")
    ):
        raise InvalidParameter("timeout", timeout, "a positive number of seconds")
    return float(timeout)


def fetch(
    name: str,
    dest: Path | None = None,
    *,
    sha256: str | None = None,
    url: str | None = None,
    opener: Callable = urllib.request.urlopen,
    log: Callable[[str], None] = print,
    timeout: float = DEFAULT_TIMEOUT_S,
    accept_unpinned: bool = False,
) -> Path:
    """Download, verify and unpack dataset `name` into `dest` (data/datasets/NAME); every network
    read waits at most `timeout` seconds. A source with no checksum (published, or given as
    `sha256`) is refused before anything is downloaded unless `accept_unpinned`."""
    sources = SOURCES.get(name)
    timeout = _validate_timeout(timeout)
    dest = Path(dest) if dest else datasets_dir() / name
    if (sha256 or url) and len(sources) == 1:
        sources = (
            replace(sources[0], sha256=sha256 or sources[0].sha256, url=url or sources[0].url),
        )
    unpinned = [s.filename for s in sources if not (s.sha256 or s.md5)]
    if unpinned and not accept_unpinned:
        raise Unpinned(
            f"{name}: {', '.join(unpinned)} has no published checksum, so a tampered or damaged "
            f"download could not be told apart; give its sha256 with --sha256 (from a copy you "
            f"trust), or pass --accept-unpinned to download it unverified (its sha256 is then "
            f"recorded in FETCHED.json)"
        )
    dest.mkdir(parents=True, exist_ok=True)
    remove_stale_downloads(dest, log)
    record = []
    for source in sources:
        with tempfile.TemporaryDirectory(dir=dest, prefix=f"{TMP_PREFIX}{os.getpid()}-") as tmp:
            part = Path(tmp) / source.filename
            try:
                with opener(source.url, timeout=timeout) as response, open(part, "wb") as out:
                    shutil.copyfileobj(response, out, 1 << 20)
            except TimeoutError as exc:
                raise MissingResource(
                    by_hand_message(
                        name,
                        dest,
                        f"{source.url}: no data for {timeout:g} s (timed out; raise --timeout "
                        "for a slow link)",
                    )
                ) from exc
            except (urllib.error.URLError, OSError, ValueError) as exc:
                raise MissingResource(by_hand_message(name, dest, f"{source.url}: {exc}")) from exc
            checked = verify(part, source)
            if checked["pinned"] == "none":
                log(
                    f"warning: {source.filename} has no published checksum (accepted unpinned); "
                    f"sha256 {checked['sha256']} (pin it with --sha256)"
                )
            if source.unpack:
                staging = Path(tmp) / "unpacked"
                staging.mkdir()
                unpack(part, staging, source.filename)
                _strip_single_root(staging)
                for item in staging.iterdir():
                    target = dest / item.name
                    if target.exists():
                        shutil.rmtree(target) if target.is_dir() else target.unlink()
                    shutil.move(str(item), target)
            else:
                shutil.move(str(part), dest / source.filename)
            record.append({**checked, "source": asdict(source)})
            log(
                f"{name}: {source.filename} ({checked['bytes']} bytes, checksum "
                f"{checked['pinned']}) -> {dest}"
            )
    atomic.write_text(dest / "FETCHED.json", json.dumps(record, indent=2))
    return dest
