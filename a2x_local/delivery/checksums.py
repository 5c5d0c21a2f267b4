"""SHA256SUMS: every file of a bundle with its SHA-256, in the format `sha256sum --check` reads."""

from __future__ import annotations

import hashlib
from pathlib import Path

SUMS = "SHA256SUMS"


def sha256_file(path: Path) -> str:
    with path.open("rb") as stream:
        return hashlib.file_digest(stream, "sha256").hexdigest()


def bundle_files(root: Path) -> list[str]:
    """Every file under ``root`` but SHA256SUMS itself, as sorted POSIX paths relative to it."""
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and p.name != SUMS)


def write_sums(root: Path, known: dict[str, str] | None = None) -> Path:
    """Write ``root/SHA256SUMS``; ``known`` holds hashes already computed (relative path -> hex)."""
    known = known or {}
    lines = [f"{known.get(rel) or sha256_file(root / rel)}  {rel}" for rel in bundle_files(root)]
    out = root / SUMS
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


def check_sums(root: Path) -> list[str]:
    """What does not match ``root/SHA256SUMS``: changed, missing and unlisted files, each named."""
    listed: dict[str, str] = {}
    for line in (root / SUMS).read_text(encoding="utf-8").splitlines():
        digest, _, rel = line.partition("  ")
        listed[rel] = digest
    problems = [f"{rel}: missing" for rel in sorted(listed) if not (root / rel).is_file()]
    problems += [f"{rel}: SHA-256 differs from SHA256SUMS" for rel in sorted(listed)
                 if (root / rel).is_file() and sha256_file(root / rel) != listed[rel]]
    problems += [f"{rel}: not listed in SHA256SUMS" for rel in bundle_files(root) if rel not in listed]
    return problems
