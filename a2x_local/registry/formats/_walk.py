"""Every file under an input folder, or an error: ingest is all or nothing, so nothing may be skipped silently.

`Path.rglob` quietly passes over folders it cannot read and never enters symbolic links to folders; this walk
follows linked folders (a data folder linked into place is still data), and fails on an unreadable folder, a link
loop, or a broken link or a special file (a named pipe, a device, a socket) where a service file is expected, naming
the path each time. Every other entry it does not read (a file of another kind, a special file of another name) is
reported with the reason, so an ingest can say what it left out.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from a2x_local.errors import InputError
from a2x_local.outfiles import kind_of

SERVICE_FILE_SUFFIXES = frozenset({".json", ".jsonl", ".csv"})
SKILL_FILE = "SKILL.md"


def _wanted(name: str) -> bool:
    return name == SKILL_FILE or Path(name).suffix.lower() in SERVICE_FILE_SUFFIXES


def check_name(path: Path) -> None:
    """A path whose bytes are not UTF-8 decodes to lone surrogates, which nothing downstream can store."""
    if any("\udc80" <= ch <= "\udcff" for ch in str(path)):
        raise InputError(ascii(str(path)), "the file name is not valid UTF-8", hint="rename it")


@dataclass(frozen=True)
class Skipped:
    """An entry of an input folder that was not read, and why."""

    path: str
    reason: str


@dataclass
class Walk:
    """What a folder walk found: the files ingest may read, sorted, and every other entry with the reason."""

    files: list[Path] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)


def walk_files(folder: Path) -> Walk:
    """Files under ``folder`` that ingest may read (SKILL.md, .json, .jsonl, .csv), and the entries it leaves out;
    raises on anything it cannot see, and on a service file's name that is not a regular file."""
    found: list[Path] = []
    skipped: list[Skipped] = []
    # Each entry: a folder to list and the (device, inode) of the folders above it, to recognise a loop.
    todo: list[tuple[Path, tuple[tuple[int, int], ...]]] = [(folder, ())]
    while todo:
        current, ancestors = todo.pop()
        check_name(current)
        try:
            stat = current.stat()
            identity = (stat.st_dev, stat.st_ino)
            with os.scandir(current) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError as exc:
            raise InputError(str(current), f"cannot read folder: {exc.strerror or exc}",
                             hint="fix its permissions, or leave it out of the ingest") from exc
        if identity in ancestors:
            raise InputError(str(current), "is a symbolic link loop (it leads back to a folder above it)",
                             hint="remove the link, or ingest the folders it points to directly")
        for entry in entries:
            path = Path(entry.path)
            try:
                is_dir = entry.is_dir()
                is_file = entry.is_file()
            except OSError as exc:  # ELOOP: a link that points at itself
                raise InputError(str(path), f"is a symbolic link loop: {exc.strerror or exc}",
                                 hint="remove the loop, or point at the files themselves") from exc
            if is_dir:
                todo.append((path, (*ancestors, identity)))
            elif is_file and _wanted(entry.name):
                found.append(path)
            elif is_file:
                skipped.append(Skipped(str(path), "not a service file (SKILL.md, .json, .jsonl, .csv)"))
            else:
                _special(path, entry, skipped)
    for path in found:
        check_name(path)
    return Walk(sorted(found), sorted(skipped, key=lambda s: s.path))


def _special(path: Path, entry: os.DirEntry[str], skipped: list[Skipped]) -> None:
    """An entry that is neither a folder nor a regular file: an error under a service file's name, else skipped."""
    if entry.is_symlink() and not os.path.exists(path):
        if _wanted(entry.name):
            raise InputError(str(path), f"is a broken symbolic link (to {os.readlink(path)})",
                             hint="fix or remove the link")
        skipped.append(Skipped(str(path), f"a broken symbolic link (to {os.readlink(path)})"))
        return
    kind = kind_of(os.stat(path).st_mode)
    if _wanted(entry.name):
        raise InputError(str(path), f"is {kind}, not a regular file; only regular files are read",
                         hint="replace it with a regular file, or move it out of the folder")
    skipped.append(Skipped(str(path), f"{kind}, not a regular file"))
