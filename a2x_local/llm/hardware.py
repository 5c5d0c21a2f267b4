"""What the machine computes well: the number format and the compile mode an engine's "auto" settings resolve to.

Measured with SmolLM2-135M-Instruct on vLLM's CPU backend (docs/engines.md "A real model on a CPU"): on a CPU with
native bfloat16 (AMX or AVX512-BF16) bfloat16 prefills ~3.3x and decodes ~2x faster than float32; on a CPU without
it (AVX2 only) bfloat16 falls back to slow generic kernels ("Failed to create oneDNN linear") and float32 is the
only sensible choice. torch.compile costs a minute or more at every start on a CPU (its cache does not survive
restarts reliably) for ~40% more throughput, which a CPU job recovers only after minutes of work; on a GPU, CUDA
graphs and compilation pay for themselves at once.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass
from functools import cache
from pathlib import Path

# CPU flags (Linux /proc/cpuinfo) that mean native bfloat16 arithmetic.
_X86_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})
_ARM_BF16_FEATURES = frozenset({"bf16"})


@cache
def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """The feature flags of the first CPU (x86 `flags`, ARM `Features`); empty where the file is not readable."""
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        return frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip().lower() in ("flags", "features"):
            return frozenset(value.split())
    return frozenset()


def cpu_has_bfloat16(flags: frozenset[str] | None = None, machine: str | None = None) -> bool:
    """Whether this CPU computes bfloat16 natively (AMX / AVX512-BF16 on x86, BF16 on ARM)."""
    flags = cpu_flags() if flags is None else flags
    machine = (machine or platform.machine()).lower()
    wanted = _ARM_BF16_FEATURES if machine in ("aarch64", "arm64") else _X86_BF16_FLAGS
    return bool(flags & wanted)


@dataclass(frozen=True)
class Resolved:
    """A setting as the engine will run it, and why (shown in the engine's description and the start-up log)."""

    value: str | bool
    reason: str


def resolve_dtype(requested: str, *, on_gpu: bool, cpu_bf16: bool | None = None) -> Resolved:
    """The number format to load the weights in. "auto" on a GPU is the checkpoint's own; on a CPU it is bfloat16
    where the CPU computes it natively and float32 elsewhere. An explicit value is kept as asked."""
    if requested != "auto":
        return Resolved(requested, "set explicitly")
    if on_gpu:
        return Resolved("auto", "the checkpoint's own number format (GPU)")
    native = cpu_has_bfloat16() if cpu_bf16 is None else cpu_bf16
    if native:
        return Resolved("bfloat16", "auto: this CPU computes bfloat16 natively (AMX or AVX512-BF16)")
    return Resolved("float32", "auto: this CPU has no native bfloat16, where bfloat16 runs on slow fallback kernels")


def resolve_eager(requested: str | bool, *, on_gpu: bool) -> Resolved:
    """Whether vLLM runs the model eagerly. "auto": compiled with CUDA graphs on a GPU, eager on a CPU (compiling
    costs over a minute at every start there)."""
    if isinstance(requested, bool):
        return Resolved(requested, "set explicitly")
    if on_gpu:
        return Resolved(False, "auto: torch.compile and CUDA graphs on a GPU")
    return Resolved(True, "auto: eager on a CPU (compiling costs over a minute at every start)")
