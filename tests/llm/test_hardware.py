"""The "auto" engine settings resolve by what the machine computes well (llm/hardware.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from a2x_local.llm.hardware import cpu_flags, cpu_has_bfloat16, resolve_dtype, resolve_eager

AVX2 = frozenset({"fpu", "sse4_2", "avx", "avx2", "fma"})
SAPPHIRE = AVX2 | {"avx512f", "avx512_bf16", "amx_bf16", "amx_tile"}


def test_bfloat16_is_native_only_with_amx_or_avx512_bf16_on_x86() -> None:
    assert not cpu_has_bfloat16(AVX2, "x86_64")
    assert not cpu_has_bfloat16(AVX2 | {"avx512f"}, "x86_64")
    assert cpu_has_bfloat16(SAPPHIRE, "x86_64")
    assert cpu_has_bfloat16(AVX2 | {"avx512_bf16"}, "x86_64")


def test_arm_reads_its_features_line() -> None:
    assert cpu_has_bfloat16(frozenset({"fp", "asimd", "bf16"}), "aarch64")
    assert not cpu_has_bfloat16(frozenset({"fp", "asimd"}), "aarch64")
    assert not cpu_has_bfloat16(frozenset({"bf16"}), "x86_64")     # an x86 CPU has no flag of that name


def test_cpu_flags_reads_the_first_flags_line(tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: X\nflags\t\t: fpu avx2 amx_bf16\n\nprocessor\t: 1\nflags\t: fpu\n")
    assert cpu_flags(info) == frozenset({"fpu", "avx2", "amx_bf16"})
    assert cpu_flags(tmp_path / "missing") == frozenset()


@pytest.mark.parametrize(("native", "expected"), [(True, "bfloat16"), (False, "float32")])
def test_auto_dtype_on_a_cpu_follows_its_bfloat16_support(native: bool, expected: str) -> None:
    resolved = resolve_dtype("auto", on_gpu=False, cpu_bf16=native)
    assert resolved.value == expected and "auto" in resolved.reason


def test_auto_dtype_on_a_gpu_is_the_checkpoints_and_explicit_values_stay() -> None:
    assert resolve_dtype("auto", on_gpu=True).value == "auto"
    assert resolve_dtype("bfloat16", on_gpu=False, cpu_bf16=False).value == "bfloat16"
    assert resolve_dtype("float16", on_gpu=True).value == "float16"


def test_auto_eager_means_eager_on_a_cpu_and_compiled_on_a_gpu() -> None:
    assert resolve_eager("auto", on_gpu=False).value is True
    assert resolve_eager("auto", on_gpu=True).value is False
    assert resolve_eager(False, on_gpu=False).value is False
    assert resolve_eager(True, on_gpu=True).value is True
