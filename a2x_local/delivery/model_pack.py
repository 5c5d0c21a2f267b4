"""A model folder as one archive with a manifest (every file's size and SHA-256, the alias, and the settings the
folder was checked with), and the check of such an archive or of the folder it unpacks to, file by file.

The archive is an uncompressed tar (weights do not compress) holding `NAME/...` and `NAME/a2x-model-manifest.json`;
the same manifest is written beside it, to read without opening the archive. Hashes are read in 1 MiB blocks, so a
32B model is checked at disk speed with little memory.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Any

from a2x_local.errors import UserError

MANIFEST = "a2x-model-manifest.json"
FORMAT = "a2x-model-pack"
_BLOCK = 1 << 20
# The hub's download bookkeeping (`hf download --local-dir` writes .cache/huggingface/): not part of the model.
_SKIPPED_DIRS = {".cache"}

Tick = Callable[[int], None]  # called with the bytes just read
Progress = Callable[[str, int], Tick]  # (label, total bytes) -> a tick for one progress bar


@dataclass(frozen=True)
class ModelToPack:
    folder: Path
    name: str                                   # the archive's base name and the folder it unpacks to
    alias: str | None = None
    checked_with: dict[str, Any] = field(default_factory=dict)  # engine settings and `models check` outcome


@dataclass
class PackReport:
    archive: Path
    manifest: Path
    files: int
    bytes: int


@dataclass
class VerifyReport:
    path: Path
    name: str
    alias: str | None
    files: int = 0
    bytes: int = 0
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "name": self.name, "alias": self.alias, "files": self.files,
                "bytes": self.bytes, "ok": self.ok, "problems": self.problems, "warnings": self.warnings}


def _digest(stream: IO[bytes], tick: Tick | None) -> tuple[str, int]:
    digest, size = hashlib.sha256(), 0
    while block := stream.read(_BLOCK):
        digest.update(block)
        size += len(block)
        if tick:
            tick(len(block))
    return digest.hexdigest(), size


def model_files(folder: Path) -> list[Path]:
    """Every regular file of the model folder (links followed), relative, sorted; the hub's .cache left out."""
    found = []
    for root, dirs, files in os.walk(folder, followlinks=True):
        rel_root = Path(root).relative_to(folder)
        dirs[:] = sorted(d for d in dirs if not (rel_root == Path(".") and d in _SKIPPED_DIRS))
        found += [rel_root / name for name in files if (Path(root) / name).is_file() and name != MANIFEST]
    return sorted(found)


def pack_model(model: ModelToPack, out_dir: Path, progress: Progress | None = None) -> PackReport:
    """Write ``out_dir/NAME.tar`` and ``out_dir/NAME.manifest.json``; nothing is left half-written."""
    folder = model.folder
    if not folder.is_dir():
        raise UserError(f"{folder}: no such model folder", hint="give a model folder or an alias whose folder exists")
    files = model_files(folder)
    if not files:
        raise UserError(f"{folder}: the model folder has no files", hint="check the path")
    out_dir.mkdir(parents=True, exist_ok=True)
    archive, manifest_path = out_dir / f"{model.name}.tar", out_dir / f"{model.name}.manifest.json"
    for path in (archive, manifest_path):
        if path.exists():
            raise UserError(f"{path} already exists", hint="remove it, or pack into another folder (--out)")
    tick = progress(f"hashing {model.name}", sum((folder / rel).stat().st_size for rel in files)) if progress else None
    entries = []
    for rel in files:
        with (folder / rel).open("rb") as stream:
            sha, size = _digest(stream, tick)
        entries.append({"path": rel.as_posix(), "bytes": size, "sha256": sha})
    manifest = {"format": FORMAT, "version": 1, "name": model.name, "alias": model.alias,
                "checked_with": model.checked_with, "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "files": entries, "total_bytes": sum(e["bytes"] for e in entries)}
    text = json.dumps(manifest, indent=2, ensure_ascii=False) + "\n"
    partial = archive.with_name(archive.name + ".partial")
    try:
        with tarfile.open(partial, "w", format=tarfile.PAX_FORMAT, dereference=True) as tar:
            for entry in entries:
                tar.add(folder / entry["path"], arcname=f"{model.name}/{entry['path']}", recursive=False)
            info = tarfile.TarInfo(f"{model.name}/{MANIFEST}")
            data = text.encode("utf-8")
            info.size, info.mtime, info.mode = len(data), int(time.time()), 0o644
            tar.addfile(info, io.BytesIO(data))
        manifest_path.write_text(text, encoding="utf-8")
        partial.replace(archive)
    except BaseException:
        partial.unlink(missing_ok=True)
        manifest_path.unlink(missing_ok=True)
        raise
    return PackReport(archive, manifest_path, len(entries), manifest["total_bytes"])


def _load_manifest(text: bytes | str, where: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise UserError(f"{where}: the manifest is not valid JSON ({exc})", hint="pack the model again") from exc
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("files"), list):
        raise UserError(f"{where}: not an a2x-local model manifest",
                        hint="pack the folder with `a2x-local models pack`")
    return data


def verify_model(path: Path, progress: Progress | None = None) -> VerifyReport:
    """Check every file of a packed model (an archive, or the folder it was unpacked to) against its manifest:
    present, the same size, the same SHA-256. Each problem names the file."""
    if path.is_dir():
        return _verify_folder(path, progress)
    if path.is_file() and tarfile.is_tarfile(path):
        return _verify_archive(path, progress)
    raise UserError(f"{path}: neither a model archive (.tar) nor a model folder",
                    hint="give the NAME.tar that `models pack` wrote, or the folder it was unpacked to")


def _expected(manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {entry["path"]: entry for entry in manifest["files"]}


def _compare(report: VerifyReport, rel: str, entry: dict[str, Any], sha: str, size: int) -> None:
    report.files += 1
    report.bytes += size
    if size != entry["bytes"]:
        report.problems.append(f"{rel}: {size:,} bytes, the manifest says {entry['bytes']:,} (truncated or changed)")
    elif sha != entry["sha256"]:
        report.problems.append(f"{rel}: SHA-256 {sha[:16]}... differs from the manifest's {entry['sha256'][:16]}..."
                               " (damaged or changed)")


def _verify_folder(folder: Path, progress: Progress | None) -> VerifyReport:
    manifest_file = folder / MANIFEST
    if not manifest_file.is_file():
        raise UserError(f"{folder}: no {MANIFEST} in the folder",
                        hint="verify the archive `models pack` wrote, or a folder unpacked from one")
    manifest = _load_manifest(manifest_file.read_bytes(), str(manifest_file))
    report = VerifyReport(folder, manifest.get("name", folder.name), manifest.get("alias"))
    expected = _expected(manifest)
    tick = progress(f"checking {report.name}", int(manifest.get("total_bytes") or 0)) if progress else None
    for rel, entry in expected.items():
        file = folder / PurePosixPath(rel)
        if not file.is_file():
            report.problems.append(f"{rel}: missing")
            continue
        with file.open("rb") as stream:
            sha, size = _digest(stream, tick)
        _compare(report, rel, entry, sha, size)
    extra = sorted({p.as_posix() for p in model_files(folder)} - set(expected))
    report.warnings += [f"{rel}: not in the manifest (added after packing?)" for rel in extra]
    return report


def _verify_archive(archive: Path, progress: Progress | None) -> VerifyReport:
    with tarfile.open(archive, "r:") as tar:
        members = tar.getmembers()
        manifests = [m for m in members if PurePosixPath(m.name).name == MANIFEST and m.name.count("/") == 1]
        if len(manifests) != 1:
            raise UserError(f"{archive}: the archive has no {MANIFEST}", hint="pack the model with `models pack`")
        name = manifests[0].name.split("/")[0]
        handle = tar.extractfile(manifests[0])
        manifest = _load_manifest(handle.read() if handle else b"", f"{archive}:{manifests[0].name}")
        report = VerifyReport(archive, manifest.get("name", name), manifest.get("alias"))
        expected = _expected(manifest)
        tick = progress(f"checking {report.name}", int(manifest.get("total_bytes") or 0)) if progress else None
        seen = set()
        for member in members:
            if member is manifests[0]:
                continue
            rel = member.name[len(name) + 1:] if member.name.startswith(name + "/") else member.name
            if not member.isfile() or rel not in expected:
                report.problems.append(f"{member.name}: in the archive but not in the manifest")
                continue
            stream = tar.extractfile(member)
            sha, size = _digest(stream, tick) if stream else ("", 0)
            _compare(report, rel, expected[rel], sha, size)
            seen.add(rel)
        report.problems += [f"{rel}: missing from the archive" for rel in sorted(set(expected) - seen)]
    beside = archive.with_name(archive.name.removesuffix(".tar") + ".manifest.json")
    if beside.is_file() and _load_manifest(beside.read_bytes(), str(beside))["files"] != manifest["files"]:
        report.problems.append(f"{beside.name}: differs from the manifest inside the archive")
    return report
