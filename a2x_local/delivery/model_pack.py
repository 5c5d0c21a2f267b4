"""A model folder as one archive with a manifest (every file's size and SHA-256, the alias, and the settings the
folder was checked with), and the check of such an archive or of the folder it unpacks to, file by file.

The archive is an uncompressed tar (weights do not compress) holding `NAME/...` and `NAME/a2x-model-manifest.json`;
the same manifest is written beside it, to read without opening the archive. Hashes are read in 1 MiB blocks, so a
32B model is checked at disk speed with little memory.

Both sides hold the rules of `model_files.py` (what a model folder may hold) and `model_manifest.py` (a manifest is
bounded, checked input). An archive is intact only when every member is a regular file or folder strictly inside
`NAME/`, with a name no other member has, listed once, with the manifest's size and hash. The headers are read
bounded first (`model_tar.py`: no large extended header, at most `MAX_MEMBERS` members, sizes checked against the
archive's size and what it holds on disk, an archive with holes refused), so a small archive that claims a terabyte
is refused before anything is hashed; at most `MAX_PROBLEMS` problems are listed (with a count of the rest).
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from a2x_local.delivery.model_files import (
    MANIFEST,
    check_name,
    hole_at,
    inside,
    is_model_file,
    is_weight_file,
    name_problem,
    path_problem,
    sparse_problem,
    walk_model,
)
from a2x_local.delivery.model_manifest import (
    FORMAT,
    MANIFEST_MAX_BYTES,
    SIZE_HINT,
    Manifest,
    decode,
    parse_manifest,
    read_manifest,
)
from a2x_local.delivery.model_tar import (
    COPY_HINT,
    MAX_MEMBERS,
    check_allocated,
    kind,
    members,
    name_problems,
    open_tar,
)
from a2x_local.delivery.model_tar import shown as member_shown
from a2x_local.errors import InputError, UserError
from a2x_local.jsonfiles import open_regular
from a2x_local.outfiles import describe_loop
from a2x_local.text import quoted

__all__ = ["MAX_MEMBERS", "MAX_PROBLEMS", "ModelToPack", "PackReport", "VerifyReport", "pack_model", "verify_model"]

_BLOCK = 1 << 20
MAX_PROBLEMS = 100               # problems listed by one verify; the rest are counted
_TAIL_MAX = 1 << 20              # the zero blocks a tar ends with (10 KiB from tarfile and GNU tar's defaults)

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
    more_problems: int = 0       # problems past MAX_PROBLEMS, counted only
    more_warnings: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems and not self.more_problems

    def problem(self, text: str) -> None:
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(text)
        else:
            self.more_problems += 1

    def warning(self, text: str) -> None:
        if len(self.warnings) < MAX_PROBLEMS:
            self.warnings.append(text)
        else:
            self.more_warnings += 1

    def to_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "name": self.name, "alias": self.alias, "files": self.files,
                "bytes": self.bytes, "ok": self.ok, "problems": self.problems, "more_problems": self.more_problems,
                "warnings": self.warnings, "more_warnings": self.more_warnings}


def _digest(stream: IO[bytes], tick: Tick | None, limit: int | None = None) -> tuple[str, int]:
    """SHA-256 and size of what ``stream`` holds (at most ``limit`` bytes of it)."""
    digest, size = hashlib.sha256(), 0
    while block := stream.read(_BLOCK if limit is None else min(_BLOCK, limit - size)):
        digest.update(block)
        size += len(block)
        if tick:
            tick(len(block))
    return digest.hexdigest(), size


def _listed(problems: list[str], limit: int = 5) -> str:
    shown = "; ".join(problems[:limit])
    return shown + (f"; and {len(problems) - limit} more" if len(problems) > limit else "")


def _create(path: Path) -> IO[bytes]:
    """A new file opened for writing; refused when anything (a file, a link, a pipe) already lies at ``path``, so
    what is removed after a failure is only ever what this pack created."""
    try:
        return os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644),
                         "wb")
    except FileExistsError as exc:
        raise UserError(f"{path} already exists (left by an earlier pack?)",
                        hint="remove it, or pack into another folder (--out)") from exc


def pack_model(model: ModelToPack, out_dir: Path, progress: Progress | None = None) -> PackReport:
    """Write ``out_dir/NAME.tar`` and ``out_dir/NAME.manifest.json``; nothing is left half-written."""
    name = check_name(model.name)
    folder = model.folder
    if not folder.is_dir():
        raise UserError(f"{folder}: no such model folder", hint="give a model folder or an alias whose folder exists")
    walk = walk_model(folder)
    if walk.problems:
        raise UserError(f"{folder}: cannot pack this model folder: {_listed(walk.problems)}",
                        hint="a model folder holds regular files and folders (a link to a file inside it is "
                             "followed); copy what a link or special file stands for into the folder, or remove it")
    files = walk.files
    if not files:
        raise UserError(f"{folder}: the model folder has no files", hint="check the path")
    if out_dir.exists() and not out_dir.is_dir():
        raise UserError(f"{out_dir}: not a folder; --out names the folder the archive is written to",
                        hint="give a folder (it is created when missing)")
    archive, manifest_path = out_dir / f"{name}.tar", out_dir / f"{name}.manifest.json"
    for path in (archive, manifest_path):
        if os.path.lexists(path):
            raise UserError(f"{path} already exists", hint="remove it, or pack into another folder (--out)")
    sources = {rel: inside(folder, rel) for rel in files}
    tick = progress(f"hashing {name}", sum(p.stat().st_size for p in sources.values() if p)) if progress else None
    entries = []
    for rel in files:
        with os.fdopen(open_regular(sources[rel] or folder / rel), "rb") as stream:
            sha, size = _digest(stream, tick)
        entries.append({"path": rel, "bytes": size, "sha256": sha})
    manifest = {"format": FORMAT, "version": 1, "name": name, "alias": model.alias,
                "checked_with": model.checked_with, "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "files": entries, "total_bytes": sum(e["bytes"] for e in entries)}
    data = (json.dumps(manifest, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    folders = _make_folders(out_dir)
    partials = [archive.with_name(archive.name + ".partial"), manifest_path.with_name(manifest_path.name + ".partial")]
    created: list[Path] = []
    try:
        with _create(partials[0]) as raw:
            created.append(partials[0])
            _write_archive(raw, name, entries, sources, folder, data)
        with _create(partials[1]) as raw:
            created.append(partials[1])
            raw.write(data)
        partials[1].replace(manifest_path)
        created[1] = manifest_path
        partials[0].replace(archive)
    except OSError as exc:
        raise UserError(f"{archive}: cannot write the archive: {exc.strerror or exc}",
                        hint="check the free space and permissions of --out; nothing was left there") from exc
    finally:
        if not archive.exists() or partials[0].exists():
            for path in created:
                path.unlink(missing_ok=True)
            for made in reversed(folders):    # only the folders this pack made, and only while empty
                try:
                    made.rmdir()
                except OSError:
                    break
    return PackReport(archive, manifest_path, len(entries), manifest["total_bytes"])


def _make_folders(out_dir: Path) -> list[Path]:
    """Create ``out_dir`` and its missing parents; the ones created, outermost first (removed again on failure)."""
    missing = [folder for folder in (out_dir, *out_dir.parents) if not os.path.lexists(folder)][::-1]
    made = []
    try:
        for folder in missing:
            folder.mkdir()
            made.append(folder)
    except OSError as exc:
        for folder in reversed(made):
            folder.rmdir()
        raise UserError(f"{out_dir}: cannot create the folder for the archive: {exc.strerror or exc}",
                        hint="give --out a folder you can write") from exc
    return made


def _write_archive(raw: IO[bytes], name: str, entries: list[dict[str, Any]], sources: dict[str, Path | None],
                   folder: Path, manifest: bytes) -> None:
    """The tar: each file as a regular member of exactly the size hashed, then the manifest."""
    now = int(time.time())
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for entry in entries:
            with os.fdopen(open_regular(sources[entry["path"]] or folder / entry["path"]), "rb") as stream:
                stat = os.fstat(stream.fileno())
                if stat.st_size != entry["bytes"]:
                    raise UserError(f"{folder / entry['path']}: changed while it was packed",
                                    hint="pack again when nothing writes into the model folder")
                info = tarfile.TarInfo(f"{name}/{entry['path']}")
                info.size, info.mtime, info.mode = entry["bytes"], int(stat.st_mtime), 0o644
                tar.addfile(info, stream)
        info = tarfile.TarInfo(f"{name}/{MANIFEST}")
        info.size, info.mtime, info.mode = len(manifest), now, 0o644
        tar.addfile(info, io.BytesIO(manifest))


def verify_model(path: Path, progress: Progress | None = None) -> VerifyReport:
    """Check every file of a packed model (an archive, or the folder it was unpacked to) against its manifest:
    present, the same size, the same SHA-256, nothing outside the folder and nothing but regular files. Each
    problem names the file."""
    try:
        os.stat(path)
    except OSError as exc:   # pathlib's is_dir() and is_file() say False for a link loop: name it, not "neither"
        if exc.errno == errno.ELOOP:
            raise UserError(f"{path}: {describe_loop(Path(path))}", hint="remove the looping link, or give the "
                            "archive or the unpacked model folder itself") from None
    if path.is_dir():
        return _verify_folder(path, progress)
    if path.is_file():
        return _verify_archive(path, progress)
    raise UserError(f"{path}: neither a model archive (.tar) nor a model folder",
                    hint="give the NAME.tar that `models pack` wrote, or the folder it was unpacked to")


def _required(report: VerifyReport, manifest: Manifest) -> None:
    """A manifest that lists no model (no config, no weights) vouches for nothing."""
    paths = [entry.path for entry in manifest.files]
    if "config.json" not in paths:
        report.problem("the manifest lists no config.json: this is no packed model")
    if not any(is_weight_file(path) for path in paths):
        report.problem("the manifest lists no weight files (*.safetensors, ...): this is no packed model")


def _compare(report: VerifyReport, rel: str, expected: int, sha: str, size: int, want: str) -> None:
    report.files += 1
    report.bytes += size
    if size != expected:
        report.problem(f"{rel}: {size:,} bytes, the manifest says {expected:,} (truncated or changed)")
    elif sha != want:
        report.problem(f"{rel}: SHA-256 {sha[:16]}... differs from the manifest's {want[:16]}... (damaged or changed)")


def _verify_folder(folder: Path, progress: Progress | None) -> VerifyReport:
    manifest_file = folder / MANIFEST
    if not os.path.lexists(manifest_file):
        raise UserError(f"{folder}: no {MANIFEST} in the folder",
                        hint="verify the archive `models pack` wrote, or a folder unpacked from one")
    manifest = read_manifest(manifest_file)
    report = VerifyReport(folder, manifest.name, manifest.alias)
    _required(report, manifest)
    walk = walk_model(folder)
    for problem in walk.problems:
        report.problem(problem)
    found = set(walk.files)
    tick = progress(f"checking {report.name}", manifest.total_bytes) if progress else None
    for entry in manifest.files:
        rel = entry.path
        if rel in walk.refused:        # the walk said why (a special file, a link out, a sparse file)
            continue
        if rel not in found:
            gone = not os.path.lexists(folder / rel)
            report.problem(f"{rel}: missing" if gone else f"{rel}: not a regular file inside the model folder")
            continue
        real = inside(folder, rel)
        try:
            stream = os.fdopen(open_regular(real or folder / rel), "rb")
        except UserError as exc:
            report.problem(f"{rel}: {exc.message}")
            continue
        with stream:
            info = os.fstat(stream.fileno())
            size = info.st_size
            if size != entry.bytes:    # no need to read it: the size alone says it changed
                _compare(report, rel, entry.bytes, "", size, entry.sha256)
                continue
            sparse = sparse_problem(stream.fileno(), info, rel)   # again: it may have been swapped since the walk
            if sparse is not None:
                report.problem(sparse)
                continue
            sha, size = _digest(stream, tick, limit=entry.bytes + 1)
        _compare(report, rel, entry.bytes, sha, size, entry.sha256)
    expected = manifest.by_path()
    for rel in sorted(found - set(expected)):
        if is_model_file(rel):
            report.problem(f"{rel}: a model file the manifest does not list (added or replaced after packing?)")
        else:
            report.warning(f"{rel}: not in the manifest (added after packing?)")
    return report


def _verify_archive(archive: Path, progress: Progress | None) -> VerifyReport:
    with os.fdopen(open_regular(archive), "rb") as raw:
        info = os.fstat(raw.fileno())
        hole = hole_at(raw.fileno(), info)
        if hole is not None:
            raise InputError(str(archive), f"is a sparse file ({info.st_size:,} bytes, {info.st_blocks * 512:,} of "
                             f"them on disk, a hole at byte {hole:,}): an archive `models pack` writes is written "
                             "whole; this one is damaged (an interrupted copy?) or claims sizes it does not hold",
                             hint=COPY_HINT)
        with open_tar(archive, raw) as tar:
            return _check_archive(archive, tar, raw, info, progress)


def _read_manifest_member(archive: Path, tar: tarfile.TarFile, members: list[tarfile.TarInfo],
                          size: int) -> tuple[tarfile.TarInfo, Manifest]:
    """The one `NAME/a2x-model-manifest.json` member, read bounded by its header before any byte of it."""
    found = [m for m in members if m.name.count("/") == 1 and m.name.endswith(f"/{MANIFEST}")]
    if not found:
        raise UserError(f"{archive}: the archive has no {MANIFEST}", hint="pack the model with `models pack`")
    if len(found) > 1:
        raise InputError(str(archive), f"holds {len(found)} manifests ({', '.join(m.name for m in found[:3])})",
                         hint=COPY_HINT)
    member = found[0]
    name = member.name.split("/")[0]
    shown = quoted(member.name)[1:-1]
    problem = name_problem(name)
    if problem is not None:
        raise InputError(str(archive), f"the archive's folder {quoted(name[:200])} {problem}", entry=shown,
                         hint="this archive was not written by `models pack`: do not unpack it")
    if not member.isreg() or member.issparse():
        raise InputError(str(archive), f"the manifest is {kind(member)}, not a regular file", entry=shown,
                         hint=COPY_HINT)
    if member.size > MANIFEST_MAX_BYTES:
        raise InputError(str(archive), f"the manifest is {member.size:,} bytes, over the limit of "
                         f"{MANIFEST_MAX_BYTES:,}", entry=shown, hint=SIZE_HINT)
    if member.offset_data + member.size > size:
        raise InputError(str(archive), "the archive ends inside the manifest: truncated", entry=shown,
                         hint=COPY_HINT)
    stream = tar.extractfile(member)
    data = b""
    while stream is not None and len(data) < member.size:     # in blocks: no read over READ_MAX
        block = stream.read(min(_BLOCK, member.size - len(data)))
        if not block:
            break
        data += block
    where = f"{archive}:{member.name}"
    return member, parse_manifest(decode(data, where), where)


def _check_archive(archive: Path, tar: tarfile.TarFile, raw: IO[bytes], info: os.stat_result,
                   progress: Progress | None) -> VerifyReport:
    size = info.st_size
    found = members(archive, tar, size)
    check_allocated(archive, found, info)
    manifest_member, manifest = _read_manifest_member(archive, tar, found, size)
    name = manifest_member.name.split("/")[0]
    report = VerifyReport(archive, manifest.name, manifest.alias)
    if manifest.name != name:
        report.problem(f"the manifest names the model {manifest.name!r}, the archive's folder is {name!r}")
    _required(report, manifest)
    if manifest.total_bytes > size:
        report.problem(f"the manifest lists {manifest.total_bytes:,} bytes of files, the archive is {size:,} bytes:"
                       " truncated, or not what it claims")
    expected = manifest.by_path()
    tick = progress(f"checking {report.name}", manifest.total_bytes) if progress else None
    for problem in name_problems(found):
        report.problem(problem)
    seen: set[str] = set()
    for member in found:
        if member is not manifest_member:
            _check_member(report, tar, member, name, expected, seen, size, tick)
    for rel in sorted(set(expected) - seen):
        report.problem(f"{rel}: missing from the archive")
    _check_tail(report, raw, tar.offset, size)
    beside = archive.with_name(archive.name.removesuffix(".tar") + ".manifest.json")
    if os.path.lexists(beside) and read_manifest(beside).files != manifest.files:
        report.problem(f"{beside.name}: differs from the manifest inside the archive")
    return report


def _check_member(report: VerifyReport, tar: tarfile.TarFile, member: tarfile.TarInfo, name: str,
                  expected: dict[str, Any], seen: set[str], size: int, tick: Tick | None) -> None:
    """One member: inside NAME/, a folder or a regular file listed once, with the manifest's size (checked against
    the header and the archive's size before a byte is hashed) and hash."""
    shown = member_shown(member)
    if member.name == name and member.isdir():      # the folder itself (GNU tar writes it first)
        return
    if not member.name.startswith(f"{name}/"):
        report.problem(f"{shown}: outside the archive's folder {name}/ (it would unpack elsewhere)")
        return
    rel = member.name[len(name) + 1:]
    problem = path_problem(rel)
    if problem is not None:
        report.problem(f"{shown}: {problem}")
        return
    if member.isdir():
        return
    if not member.isreg() or member.issparse():
        report.problem(f"{shown}: is {kind(member)}, not a regular file; a packed model holds only regular files "
                       "and folders")
        return
    if rel in seen:        # named by name_problems
        return
    seen.add(rel)
    entry = expected.get(rel)
    if entry is None:
        report.problem(f"{shown}: in the archive but not in the manifest")
        return
    if member.size != entry.bytes:
        report.problem(f"{rel}: {member.size:,} bytes in the archive, the manifest says {entry.bytes:,}")
        return
    if member.offset_data + member.size > size:
        report.problem(f"{rel}: truncated: the archive ends {size - member.offset_data:,} bytes into its "
                       f"{member.size:,}")
        return
    stream = tar.extractfile(member)
    sha, got = _digest(stream, tick, limit=member.size) if stream is not None else ("", 0)
    _compare(report, rel, entry.bytes, sha, got, entry.sha256)


def _check_tail(report: VerifyReport, raw: IO[bytes], end: int, size: int) -> None:
    """After the last member a tar holds only zero blocks; anything else is a cut-off or hidden member."""
    tail = size - end
    if tail <= 0:
        return
    if tail > _TAIL_MAX:
        report.problem(f"{tail:,} bytes follow the archive's last member: damaged, or members hidden after its end")
        return
    raw.seek(end)
    if raw.read(tail).strip(b"\0"):
        report.problem(f"the archive's last {tail:,} bytes are not a whole member: truncated or damaged")
