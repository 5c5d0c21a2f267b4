"""The pinned set of a target: which extra of a2x-local it installs, which constraints apply, and what a resolution
may keep. `constraints.txt` is the tested CPU environment (`pip freeze` of the venv the suite passes in), so the
CPU bundle carries exactly that set; the GPU build has no tested environment here and keeps what pip resolves."""

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
    torch_build: str            # "cpu": torch must carry the local label +cpu; "cuda": it must not
    unpinned_constraints: tuple[str, ...]  # constraints.txt lines not applied to this target
    keep_only_pinned: bool      # drop what pip resolves beyond constraints.txt (the tested environment)
    requirements: str           # the file of the target's direct pins, applied too (requirements-gpu.txt pins vllm)


TARGETS: dict[str, Target] = {
    # scripts/setup removes torchvision, torchaudio, torchcodec and triton after installing (they break `import vllm`
    # with the CPU torch, or are unused); the tested environment therefore lacks them, and so does the bundle.
    "cpu": Target("cpu", "cpu", "cpu", (), keep_only_pinned=True, requirements="requirements.txt"),
    # vLLM's GPU build chooses its own CUDA torch (requirements-gpu.txt): the CPU pin of torch does not apply.
    "gpu": Target("gpu", "gpu", "cuda", ("torch",), keep_only_pinned=False, requirements="requirements-gpu.txt"),
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


def constraints_for(target: Target, constraints: Path, out: Path) -> Path:
    """The constraints file pip resolves the target under: constraints.txt less the lines the target leaves free,
    plus the pins of the target's requirements file that constraints.txt lacks (the GPU build of vLLM)."""
    skipped = {normalize(name) for name in target.unpinned_constraints}
    lines = [line for line in constraints.read_text(encoding="utf-8").splitlines()
             if not (_REQUIREMENT.match(line.strip()) and normalize(line.split("==")[0].strip()) in skipped)]
    pinned = read_pins(constraints)
    requirements = constraints.with_name(target.requirements)
    extra = read_pins(requirements) if requirements.is_file() else {}
    lines += [f"{name}=={version}" for name, version in extra.items() if name not in pinned and name not in skipped]
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out
