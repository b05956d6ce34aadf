import pytest

from kit.errors import InvalidParameter
from kit.hardware import kinds as hardware


@pytest.mark.parametrize("device,kind", [("cpu", "cpu"), ("cuda", "cuda"), ("tensorrt", "cuda"),
                                         ("ipu", "ipu")])
def test_every_device_has_one_kind(device, kind):
    assert hardware.kind_of(device) == kind


def test_auto_follows_the_preference_order():
    assert hardware.resolve("auto", kinds=["cpu"]) == "cpu"
    assert hardware.resolve("auto", kinds=["cpu", "cuda"]) == "cuda"
    assert hardware.resolve("auto", kinds=["cpu", "cuda", "ipu"]) == "ipu"
    assert hardware.resolve("cuda", kinds=["cpu"]) == "cuda"  # an explicit kind is kept


def test_unknown_names_say_what_is_allowed():
    with pytest.raises(InvalidParameter, match="hardware='tpu'.*auto, cpu, cuda, ipu"):
        hardware.resolve("tpu")
    with pytest.raises(InvalidParameter, match="device='gpu'.*cpu, cuda, tensorrt, ipu"):
        hardware.kind_of("gpu")


def test_parts_by_ipu_version():
    assert hardware.part_for_ipu_version("ipu21").key == "c600"
    assert hardware.part_for_ipu_version("ipu2").key == "m2000"
    assert hardware.part_for_ipu_version("") is None and hardware.part_for_ipu_version(None) is None


def test_measured_on_matches_only_the_exact_real_part():
    c600 = hardware.MeasuredOn("ipu", "C600", part="c600")
    assert c600.same_part("c600") and not c600.same_part("gc2")  # a C600 never reproduces C2
    emulated = hardware.MeasuredOn("ipu", "C600", part="c600", emulated=True)
    assert not emulated.same_part("c600") and "not run on an IPU" in emulated.label
    assert not hardware.MeasuredOn("cpu", "EPYC").same_part("c600")


def test_measured_on_reads_a_result_backend_block():
    block = {"device_info": {"kind": "ipu", "name": "x", "ipu_version": "ipu21"},
             "session": {"emulated": True}}
    m = hardware.MeasuredOn.from_backend(block)
    assert (m.hardware_class, m.part, m.emulated) == ("ipu", "c600", True)


def test_hardware_part_names_the_exact_part_of_each_kind(tmp_path, monkeypatch):
    """The reuse fingerprint's hardware part: CPU model, GPU names, IPU board from gc-info."""
    from kit.hardware.environment import cpu_model
    from kit.hardware.identity import hardware_part

    assert hardware_part("cpu") == cpu_model()
    monkeypatch.setenv("PATH", str(tmp_path))  # no gc-info
    assert hardware_part("ipu") == "IPU part unknown (no gc-info on PATH)"
    gc_info = tmp_path / "gc-info"
    gc_info.write_text("#!/bin/sh\nprintf 'Device Info:\\n  board type: M2000\\n  ipu architecture: ipu2\\n'\n")
    gc_info.chmod(0o755)
    assert hardware_part("ipu") == "board type: M2000, ipu architecture: ipu2"
    with pytest.raises(InvalidParameter, match="hardware"):
        hardware_part("tpu")
