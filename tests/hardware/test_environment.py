import pytest

from kit.hardware import environment
from kit.hardware.environment import fp32_flops_per_cycle


def test_flops_per_cycle_by_microarchitecture():
    avx512 = frozenset({"avx2", "avx512f"})
    assert fp32_flops_per_cycle(avx512, "AuthenticAMD", 25) == 32  # Zen 4: 2 x 256-bit halves
    assert fp32_flops_per_cycle(avx512, "AuthenticAMD", 26) == 64  # Zen 5: full 512-bit
    assert fp32_flops_per_cycle(avx512, "GenuineIntel", 6) == 64
    assert fp32_flops_per_cycle(frozenset({"avx2"}), "GenuineIntel", 6) == 32


def test_peak_names_its_method():
    peak = environment.cpu_peak_gflops("bf16")
    assert peak["gflops"] > 0 and "FLOP/cycle/core" in peak["method"]


def test_capture_has_provenance_fields():
    env = environment.capture()
    assert {"captured_at", "cpu", "packages", "python", "ipu_present"} <= set(env)
    from kit.hardware import kinds as hardware

    assert "cpu" in hardware.present()


def test_torch_s_cuda_build_is_read_from_its_version_file_without_importing_it(
    tmp_path, monkeypatch
):
    import sys

    def package(name: str, text: str | None) -> str:
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("raise ImportError('never imported')\n")
        if text is not None:
            (tmp_path / name / "version.py").write_text(text)
        return name

    monkeypatch.syspath_prepend(str(tmp_path))
    header = "from typing import Optional\n__version__ = '2.13.0'\n"
    assert (
        environment.torch_build_cuda(package("cpubuild", header + "cuda: Optional[str] = None\n"))
        is None
    )
    assert (
        environment.torch_build_cuda(package("gpubuild", header + "cuda: Optional[str] = '13.0'\n"))
        == "13.0"
    )
    assert environment.torch_build_cuda(package("oldbuild", header + "cuda = '11.8'\n")) == "11.8"
    assert environment.torch_build_cuda(package("odd", header + "cuda = detect()\n")) == "unknown"
    assert environment.torch_build_cuda(package("bare", None)) == "unknown"
    assert environment.torch_build_cuda("no_such_package_here") is None
    assert not {"cpubuild", "gpubuild", "oldbuild", "odd", "bare"} & set(sys.modules)


def test_a_cpu_job_s_provenance_does_not_import_torch():
    """2.6 s of a CPU job that runs OpenVINO went into importing torch for its CUDA versions."""
    import subprocess
    import sys

    if environment.torch_build_cuda() is not None:
        pytest.skip("torch here is a CUDA build: its cuDNN version needs the import")
    code = (
        "import sys; from kit.hardware.environment import capture; facts = capture()['gpu']; "
        "print('torch' in sys.modules, facts['cuda_runtime_torch'], facts['cudnn_torch'])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["False", "None", "None"]
