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
