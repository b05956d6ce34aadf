import pytest

from kit.errors import InvalidParameter
from kit.hardware import kinds as hardware
from kit.hardware import parts


@pytest.mark.parametrize(
    "device,kind", [("cpu", "cpu"), ("cuda", "cuda"), ("tensorrt", "cuda"), ("ipu", "ipu")]
)
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
    assert parts.part_for_ipu_version("ipu21").key == "c600"
    assert parts.part_for_ipu_version("") is None and parts.part_for_ipu_version(None) is None


def test_bow_and_m2000_are_separate_parts_with_their_own_peaks():
    """Issue 29: both were 'm2000' with GC200 peaks; a Bow IPU peaks at 350 TFLOP/s fp16."""
    assert parts.part_for_ipu_version("ipu2", "M2000 M2000", env={}).key == "m2000"
    assert parts.part_for_ipu_version("ipu2", "Bow-2000 Bow-2000", env={}).key == "bow"
    assert parts.part_for_ipu_version("ipu2", "M2000 Bow", env={}).key == "bow"
    assert parts.part_for_ipu_version("ipu2", None, env={}) is None  # undecided: never guessed
    assert parts.part_for_ipu_version("ipu2", None, env={parts.PART_ENV: "bow"}).key == "bow"
    with pytest.raises(InvalidParameter, match="KIT_IPU_PART='c600': one of m2000, bow"):
        parts.part_for_ipu_version("ipu2", None, env={parts.PART_ENV: "c600"})
    assert parts.PARTS["bow"].peaks_gflops == {"fp32": 87.5e3, "fp16": 350e3}
    assert parts.PARTS["m2000"].peaks_gflops == {"fp32": 62.5e3, "fp16": 250e3}
    assert parts.PARTS["c600"].peaks_gflops["fp8"] == 560e3


def test_measured_on_matches_only_the_exact_real_part():
    c600 = parts.MeasuredOn("ipu", "C600", part="c600")
    assert c600.same_part("c600") and not c600.same_part("gc2")  # a C600 never reproduces C2
    emulated = parts.MeasuredOn("ipu", "C600", part="c600", emulated=True)
    assert not emulated.same_part("c600") and "not run on an IPU" in emulated.label
    assert not parts.MeasuredOn("cpu", "EPYC").same_part("c600")


def test_measured_on_reads_a_result_backend_block():
    block = {
        "device_info": {"kind": "ipu", "name": "x", "ipu_version": "ipu21"},
        "session": {"emulated": True},
    }
    m = parts.MeasuredOn.from_backend(block)
    assert (m.hardware_class, m.part, m.emulated) == ("ipu", "c600", True)


def test_hardware_part_names_the_exact_part_of_each_kind(tmp_path, monkeypatch):
    """The reuse fingerprint's hardware part: CPU model, GPU names, IPU board from gc-info."""
    from kit.hardware.environment import cpu_model
    from kit.hardware.kinds import part as hardware_part

    assert hardware_part("cpu") == cpu_model()
    monkeypatch.setenv("PATH", str(tmp_path))  # no gc-info
    assert hardware_part("ipu") == "IPU part unknown (no gc-info on PATH)"
    gc_info = tmp_path / "gc-info"
    gc_info.write_text(
        "#!/bin/sh\nprintf 'Device Info:\\n  board type: M2000\\n  ipu architecture: ipu2\\n'\n"
    )
    gc_info.chmod(0o755)
    assert hardware_part("ipu") == "board type: M2000, ipu architecture: ipu2"
    with pytest.raises(InvalidParameter, match="hardware"):
        hardware_part("tpu")
