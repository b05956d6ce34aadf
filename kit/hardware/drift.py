"""What differs between the environment a result recorded and this one: the kit's commit and local
changes, every installed distribution's version, the hardware part, the published data and the
notebook. `kit rerun` lists these before it re-runs a result.
"""

from __future__ import annotations

from pathlib import Path

from kit.hardware import cuda
from kit.hardware.environment import cpu_model
from kit.hardware.ipu import ipu_present
from kit.hardware.source import distributions, file_sha256, kit_source, published_data_hashes


def current(notebook: Path | None = None) -> dict:
    """This machine's side of the comparison, in the keys `capture()` records them under."""
    now = {
        "kit": kit_source(),
        "distributions": distributions(),
        "cpu": {"model": cpu_model()},
        "gpus": list(cuda.visible_gpu_names()),
        "ipu_present": ipu_present(),
        "published_data": published_data_hashes(),
    }
    if notebook is not None:
        now["notebook_sha256"] = file_sha256(notebook) if notebook.is_file() else None
        now["notebook"] = str(notebook)
    return now


def _commit(kit: dict) -> str:
    if not kit.get("commit"):
        return f"installed version {kit.get('version') or '?'} (no git commit)"
    if kit.get("dirty"):
        return (
            f"{kit['commit'][:12]} with local changes (sha256 {str(kit.get('diff_sha256'))[:12]})"
        )
    return f"{kit['commit'][:12]} (clean)"


def differences(recorded: dict, now: dict) -> list[str]:
    """One line per difference, "what: <in the result> in the result, <here> here"; [] when the
    commit, every distribution, the hardware part, the published data and the notebook all match.
    A result that did not record a part (an older result) says so as a difference."""
    out: list[str] = []
    old_kit, new_kit = recorded.get("kit"), now["kit"]
    if not old_kit:
        out.append("kit commit: not recorded in the result (made before provenance was complete)")
    elif _commit(old_kit) != _commit(new_kit):
        out.append(f"kit commit: {_commit(old_kit)} in the result, {_commit(new_kit)} here")
    out += _packages(recorded.get("distributions"), now["distributions"])
    for what, old, new in (
        ("CPU", (recorded.get("cpu") or {}).get("model"), now["cpu"]["model"]),
        ("GPUs", recorded.get("gpus"), now["gpus"]),
        ("IPU present", recorded.get("ipu_present"), now["ipu_present"]),
    ):
        if old != new:
            out.append(f"hardware {what}: {old!r} in the result, {new!r} here")
    out += _files("published data", recorded.get("published_data"), now["published_data"])
    if "notebook_sha256" in now and recorded.get("notebook_sha256") != now["notebook_sha256"]:
        out.append(
            f"notebook {now.get('notebook', '')}: sha256 "
            f"{str(recorded.get('notebook_sha256'))[:12]} in the result, "
            f"{str(now['notebook_sha256'])[:12]} here"
        )
    return out


def _packages(old: dict | None, new: dict) -> list[str]:
    if not old:
        # None, or {} as kit.results.schema fills a version-1 result that did not record them
        return ["packages: the installed distributions were not recorded in the result"]
    out = []
    for name in sorted(set(old) | set(new)):
        a, b = old.get(name), new.get(name)
        if a != b:
            out.append(
                f"package {name}: {a or 'not installed'} in the result, {b or 'not installed'} here"
            )
    return out


def _files(what: str, old: dict | None, new: dict) -> list[str]:
    if not old:  # None, or {} as kit.results.schema fills a version-1 result
        return [f"{what}: its hashes were not recorded in the result"]
    return [
        f"{what} {name}: {'changed' if old.get(name) and new.get(name) else 'added' if new.get(name) else 'removed'}"  # noqa: E501
        for name in sorted(set(old) | set(new))
        if old.get(name) != new.get(name)
    ]
