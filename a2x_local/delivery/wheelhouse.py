"""The wheelhouse of a bundle: the wheels pip resolves and downloads for a target (or those of an earlier bundle),
what the target keeps of them, and the lock install.sh installs from (`name==version --hash=sha256:...`)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from a2x_local.delivery.checksums import SUMS, check_sums, sha256_file
from a2x_local.delivery.pins import Target, normalize, read_pins
from a2x_local.delivery.pip import Resolved, fetch_resolved
from a2x_local.delivery.sbom import read_wheel
from a2x_local.errors import UserError
from a2x_local.jsonfiles import read_json

LOCK = "requirements.lock"
MANIFEST = "bundle.json"  # written by bundle.py; read here for the target of a reused bundle


def gather(target: Target, constraints: Path, project_wheel: Path, wheels: Path, pip_args: list[str],
           reuse: Path | None) -> tuple[list[Resolved], list[dict[str, str]]]:
    """Fill ``wheels`` with the dependency wheels of ``target`` and return them, and what was left out and why."""
    pins = read_pins(constraints)
    left_out: list[dict[str, str]] = []
    if reuse:
        kept, where = _reuse(reuse, target, wheels), f"{reuse}/{LOCK}"
    else:
        fetched = wheels.parent / "fetched"
        fetched.mkdir()
        fetch_resolved(f"a2x-local[{target.extra}] @ {project_wheel.resolve().as_uri()}", constraints, fetched,
                       pip_args)
        kept, left_out = select([describe(path) for path in sorted(fetched.glob("*.whl"))], target, pins)
        for entry in kept:
            (fetched / entry.filename).replace(wheels / entry.filename)
        shutil.rmtree(fetched)
        where = "the resolution"
    check_pins(kept, target, pins, where)
    return kept, left_out


def describe(wheel: Path) -> Resolved:
    """A downloaded wheel as its metadata names it (the file name spells the name differently)."""
    info = read_wheel(wheel, sha256_file(wheel))
    return Resolved(info.name, info.version, wheel.name, info.sha256)


def lock_line(entry: Resolved) -> str:
    return f"{entry.name}=={entry.version} --hash=sha256:{entry.sha256}  # {entry.filename}"


def read_lock(path: Path) -> list[Resolved]:
    """The entries of a lock file written by `_lock_line`."""
    entries = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        requirement, _, filename = line.partition("  # ")
        pin, _, digest = requirement.partition(" --hash=sha256:")
        name, _, version = pin.partition("==")
        entries.append(Resolved(name, version, filename.strip(), digest.strip()))
    return entries


def select(resolved: list[Resolved], target: Target, pins: dict[str, str]) -> tuple[list[Resolved], list[dict]]:
    """What the bundle keeps of a resolution, and what it leaves out with the reason."""
    kept, left_out = [], []
    for entry in resolved:
        key = normalize(entry.name)
        if key == "a2x-local":
            continue
        if target.keep_only_pinned and key not in pins:
            left_out.append({"name": entry.name, "version": entry.version,
                             "reason": f"resolved by pip, but not in the tested environment ({target.pins_file}): "
                                       "scripts/setup removes it"})
            continue
        kept.append(entry)
    return kept, left_out


def check_pins(kept: list[Resolved], target: Target, pins: dict[str, str], where: str) -> None:
    """Every kept package carries the version the target's pins name (a local label like +cpu aside), and torch is
    the build the target needs."""
    for entry in kept:
        key = normalize(entry.name)
        if key in pins and entry.version.split("+")[0] != pins[key].split("+")[0]:
            raise UserError(f"{where}: {entry.name}=={entry.version}, but {target.pins_file} pins {pins[key]}",
                            hint="build the bundle again without --reuse, from the same checkout")
        if key == "torch":
            is_cpu = entry.version.endswith("+cpu")
            if target.torch_build == "cpu" and not is_cpu:
                raise UserError(f"{where}: torch {entry.version} ({entry.filename}) is not the CPU build the tested "
                                "environment has (torch==X+cpu)",
                                hint="offer pip the CPU wheel: --find-links DIR with torch-X+cpu-*.whl, or pip's "
                                "extra-index-url https://download.pytorch.org/whl/cpu")
            if target.torch_build == "cuda" and is_cpu:
                raise UserError(f"{where}: torch {entry.version} ({entry.filename}) is a CPU build; the GPU bundle "
                                "needs the CUDA build vLLM was compiled against",
                                hint="your pip configuration offers a CPU torch (`pip config list`: find-links); "
                                "build the GPU bundle where pip sees PyPI's torch only (e.g. PIP_FIND_LINKS= "
                                "PIP_CONFIG_FILE=/dev/null)")


def _link_or_copy(origin: Path, dest: Path) -> None:
    try:
        os.link(origin, dest)
    except OSError:
        shutil.copy2(origin, dest)


def _reuse(earlier: Path, target: Target, wheels: Path) -> list[Resolved]:
    problems = check_sums(earlier) if (earlier / SUMS).is_file() else [f"{earlier / SUMS}: missing"]
    if problems:
        raise UserError(f"{earlier}: not an intact bundle: " + "; ".join(problems[:5]),
                        hint="reuse a bundle whose SHA256SUMS verifies, or build without --reuse")
    built_for = read_json(earlier / MANIFEST).get("target")
    if built_for != target.name:
        raise UserError(f"{earlier} is a {built_for} bundle, not {target.name}",
                        hint="reuse a bundle of the same target")
    kept = read_lock(earlier / LOCK)
    for entry in kept:
        _link_or_copy(earlier / "wheels" / entry.filename, wheels / entry.filename)
    return kept


def check_wheels(kept: list[Resolved], wheels: Path) -> dict[str, str]:
    """Each locked wheel is in the wheelhouse with the hash pip resolved; returns the hashes for SHA256SUMS."""
    known = {}
    for entry in kept:
        file = wheels / entry.filename
        if not file.is_file():
            raise UserError(f"{entry.filename}: pip did not download it", hint="run the bundle again; check pip's "
                            "configuration if it keeps failing")
        digest = sha256_file(file)
        if digest != entry.sha256:
            raise UserError(f"{entry.filename}: SHA-256 differs from the lock", hint="build the bundle again")
        known[f"wheels/{entry.filename}"] = digest
    extra = sorted({p.name for p in wheels.iterdir()} - {e.filename for e in kept})
    if len(extra) > 1:  # the project wheel is the one file not in the lock
        raise UserError(f"unexpected files in the wheelhouse: {extra[:5]}", hint="run the bundle again")
    return known
