"""The worker's versions and the IPU as PopRT and the SDK's gcipuinfo report them."""

import os
import platform
import re

import numpy as np

WORKER_VERSION = 5
FP8_OPS = ("Conv", "MatMul", "Gemm")
FP8_IPU_VERSIONS = ("ipu21",)
# runtime.Runner (1.0.2 documents no Python runtime); 1.1 to 1.5 are documented
OLDEST_RELEASE = (1, 1)
# DeviceManager.get_specific_device and RuntimeConfig's replica-to-device map
NAMED_DEVICE_RELEASE = (1, 3)
TEST_DOUBLE_NOTE = "not run on an IPU: PopRT test double over ONNX Runtime"


class HardwareError(RuntimeError):
    """The IPU present cannot run what was asked (fp8 on ipu2, no device...)."""


def environment():
    """Versions and the device as PopRT reports them; device errors are reported, not raised."""
    import poprt
    from poprt import runtime

    info = {
        "worker_version": WORKER_VERSION,
        "pid": os.getpid(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "poprt_version": getattr(poprt, "__version__", "unknown"),
        "test_double": bool(getattr(poprt, "__kit_test_double__", False)),
        "gcda_monitor": os.environ.get("GCDA_MONITOR"),
    }
    if info["test_double"]:
        info["note"] = TEST_DOUBLE_NOTE
    try:
        manager = runtime.DeviceManager()
        info["device"] = {
            "ipu_version": manager.ipu_hardware_version(),
            "num_devices": int(manager.get_num_devices()),
            "board": board_description(),
        }
    except Exception as exc:  # noqa: BLE001 - no IPU attached, driver missing...
        info["device"] = {"error": f"{type(exc).__name__}: {exc}"}
    return info


def board_description():
    """The first IPU's "board type" and "board variant" (gc-info's attributes, read through the
    SDK's gcipuinfo): what tells a Bow from an M2000, both ipu2 to PopRT. None where unreadable."""
    try:
        import gcipuinfo

        devices = gcipuinfo.gcipuinfo().getDevices()
        first = dict(devices[0]) if devices else {}
    except Exception:  # noqa: BLE001 - no SDK module, no device: the kit then asks for KIT_IPU_PART
        return None
    return " ".join(str(first[k]) for k in ("board type", "board variant") if k in first) or None


def poprt_release(version):
    """(major, minor) of the PopRT that runs, whose documented calls the worker then makes.

    >>> poprt_release("1.4.0+kit.test.double")
    (1, 4)
    """
    found = re.match(r"(\d+)\.(\d+)", str(version))
    release = (int(found.group(1)), int(found.group(2))) if found else None
    if release is None or release < OLDEST_RELEASE:
        raise HardwareError(
            f"PopRT {version!r}: the worker follows the documented Python API of PopRT 1.1 to 1.5 "
            "(runtime.Runner); run one of those"
        )
    return release


def name_device(runtime, config, device, release):
    """(id, device) of the IPU the Runner will attach, chosen through documented API: the machine's
    only IPU; else, from PopRT 1.3 on, the first `DeviceManager.get_specific_device(id)` that
    attaches, set as replica 0's device in the RuntimeConfig (`replica_to_device`), so that the
    power read is that card's. (None, None) where the config cannot name one (a PackRunnerConfig,
    PopRT 1.1 / 1.2): on a machine of several IPUs power then says it cannot tell which board is
    this run's."""
    count = int(device.get("num_devices", 0))
    if count == 1:
        return 0, None
    if release < NAMED_DEVICE_RELEASE or isinstance(config, runtime.PackRunnerConfig):
        return None, None
    manager, errors = runtime.DeviceManager(), []
    for device_id in range(count):
        try:
            chosen = manager.get_specific_device(device_id)
        except Exception as exc:  # noqa: BLE001 - busy: another process holds it
            errors.append(f"{device_id}: {exc}")
            continue
        replicas = runtime.ReplicaIdToDevice()
        replicas[0] = chosen
        config.replica_to_device = replicas
        return device_id, chosen
    raise HardwareError(
        "no free IPU among {}: get_specific_device failed for each ({})".format(
            count, "; ".join(errors)
        )
    )


def check_hardware(device, precision):
    """Before compiling: an IPU is present, and it can run `precision`."""
    if "error" in device:
        raise HardwareError("no IPU readable: " + device["error"])
    if int(device.get("num_devices", 0)) < 1:
        raise HardwareError("PopRT sees no IPU device (get_num_devices() == 0)")
    if precision == "fp8" and device.get("ipu_version") not in FP8_IPU_VERSIONS:
        raise HardwareError(
            "fp8 needs a C600 (ipu21); this IPU is {!r}, which has no fp8 (run fp16 here)".format(
                device.get("ipu_version")
            )
        )
