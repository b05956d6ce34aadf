"""The worker's versions and the IPU as PopRT and the SDK's gcipuinfo report them."""

import os
import platform

import numpy as np

WORKER_VERSION = 4
FP8_OPS = ("Conv", "MatMul", "Gemm")
FP8_IPU_VERSIONS = ("ipu21",)
TEST_DOUBLE_NOTE = "not run on an IPU: PopRT test double over ONNX Runtime"


class HardwareError(RuntimeError):
    """The IPU present cannot run what was asked (fp8 on ipu2, no device...)."""


def environment():
    """Versions and the device as PopRT reports them; device errors are reported, not raised."""
    import poprt
    from poprt import runtime

    info = {"worker_version": WORKER_VERSION, "pid": os.getpid(), "python": platform.python_version(),
            "numpy": np.__version__, "poprt_version": getattr(poprt, "__version__", "unknown"),
            "test_double": bool(getattr(poprt, "__kit_test_double__", False)),
            "gcda_monitor": os.environ.get("GCDA_MONITOR")}
    if info["test_double"]:
        info["note"] = TEST_DOUBLE_NOTE
    try:
        manager = runtime.DeviceManager()
        info["device"] = {"ipu_version": manager.ipu_hardware_version(),
                          "num_devices": int(manager.get_num_devices()), "board": board_description()}
    except Exception as exc:  # noqa: BLE001 - no IPU attached, driver missing...
        info["device"] = {"error": f"{type(exc).__name__}: {exc}"}
    return info


def board_description():
    """The first IPU's "board type" and "board variant" (gc-info's attributes, read through the SDK's
    gcipuinfo): what tells a Bow from an M2000, both ipu2 to PopRT. None where unreadable."""
    try:
        import gcipuinfo

        devices = gcipuinfo.gcipuinfo().getDevices()
        first = dict(devices[0]) if devices else {}
    except Exception:  # noqa: BLE001 - no SDK module, no device: the kit then asks for KIT_IPU_PART
        return None
    return " ".join(str(first[k]) for k in ("board type", "board variant") if k in first) or None


def attached_device(runner, device):
    """The id of the IPU the Runner attached: the machine's only one, else the id the Runner gives
    (`device_id`); None where several IPUs leave it unknown (power then says so, never sums boards)."""
    if int(device.get("num_devices", 0)) == 1:
        return 0
    found = getattr(runner, "device_id", None)
    return int(found) if found is not None else None


def check_hardware(device, precision):
    """Before compiling: an IPU is present, and it can run `precision`."""
    if "error" in device:
        raise HardwareError("no IPU readable: " + device["error"])
    if int(device.get("num_devices", 0)) < 1:
        raise HardwareError("PopRT sees no IPU device (get_num_devices() == 0)")
    if precision == "fp8" and device.get("ipu_version") not in FP8_IPU_VERSIONS:
        raise HardwareError("fp8 needs a C600 (ipu21); this IPU is {!r}, which has no fp8 "
                            "(run fp16 here)".format(device.get("ipu_version")))
