"""A model archive's tar headers, read bounded: what `models verify` knows of an archive before it hashes a byte.

tarfile trusts what headers claim. It reads a GNU long name (type L, K) or a pax header (x, g) whole, in one read
of the size its header claims (a 1 GiB one took 1.13 GB), and recurses once per chained extended header. Here no
read it makes may exceed `READ_MAX`, a member's name is at most `NAME_MAX_BYTES` and its pax attributes at most
`PAX_MAX_BYTES` (so 10,000 members cannot hold gigabytes of names), at most `MAX_MEMBERS` members are read, and
what the members claim is bounded by the archive's size and by what it holds on disk (a sparse archive claims any
size for nothing). Every refusal names the archive and the member (escaped), never a traceback.
"""

from __future__ import annotations

import os
import tarfile
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from a2x_local.delivery.model_files import MAX_FILES, SPARSE_MIN_BYTES
from a2x_local.errors import InputError, UserError
from a2x_local.text import quoted

MAX_MEMBERS = MAX_FILES          # members of one archive (files and folders), the manifest besides
READ_MAX = 1 << 20               # member data is read in 1 MiB blocks; an extended header is a few hundred bytes
NAME_MAX_BYTES = 4096            # PATH_MAX: no path `models pack` writes is longer
PAX_MAX_BYTES = 16 << 10         # pax attributes of one member (a long path, a time): a few hundred bytes
COPY_HINT = "copy the archive again from the connected machine, or pack the model again there"
_KINDS = {tarfile.SYMTYPE: "a symbolic link", tarfile.LNKTYPE: "a hard link", tarfile.CHRTYPE: "a character device",
          tarfile.BLKTYPE: "a block device", tarfile.FIFOTYPE: "a named pipe (FIFO)",
          tarfile.CONTTYPE: "a contiguous file", tarfile.GNUTYPE_SPARSE: "a sparse member"}


def kind(member: tarfile.TarInfo) -> str:
    return "a sparse member" if member.issparse() else _KINDS.get(member.type, f"of tar type {member.type!r}")


def shown(member: tarfile.TarInfo) -> str:
    """A member's name for a problem: escaped, or where it lies when it is empty (a long name of nothing)."""
    return quoted(member.name) if member.name else f"the member at byte {member.offset:,} (its name is empty)"


class _HeaderTooLarge(Exception):
    """tarfile asked for more than READ_MAX bytes at once: an extended header claiming that much."""

    def __init__(self, offset: int, size: int) -> None:
        super().__init__(offset, size)
        self.offset, self.size = offset, size


class _CappedReads:
    """The archive as tarfile sees it, refusing any single read over ``READ_MAX`` bytes."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw = raw

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0 or size > READ_MAX:
            raise _HeaderTooLarge(self.raw.tell(), -1 if size is None else size)
        return self.raw.read(size)

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        return self.raw.seek(offset, whence)

    def tell(self) -> int:
        return self.raw.tell()


@contextmanager
def open_tar(archive: Path, raw: IO[bytes]) -> Iterator[tarfile.TarFile]:
    """The archive as a tarfile whose reads are capped; what tarfile raises inside the block (a damaged header, a
    header too large, a chain of extended headers) becomes an error naming the archive."""
    try:
        try:
            tar = tarfile.open(fileobj=_CappedReads(raw), mode="r:")  # type: ignore[call-overload]  # noqa: SIM115
        except tarfile.TarError as exc:
            raise UserError(f"{archive}: neither a model archive (.tar) nor a model folder ({exc})",
                            hint="give the NAME.tar that `models pack` wrote, or the folder unpacked from it") from exc
        with tar:
            yield tar
    except (tarfile.TarError, EOFError) as exc:
        raise InputError(str(archive), f"cannot be read as a tar archive ({exc}): damaged or truncated",
                         hint=COPY_HINT) from exc
    except _HeaderTooLarge as exc:
        raise InputError(str(archive), f"the tar header before byte {exc.offset:,} announces {exc.size:,} bytes of "
                         "extended header (a GNU long name or pax attributes) to read at once, over the "
                         f"{READ_MAX:,} a model archive needs: not read", hint=COPY_HINT) from exc
    except RecursionError as exc:
        raise InputError(str(archive), "holds a chain of hundreds of extended headers (GNU long names or pax "
                         "attributes) before one member; `models pack` writes at most one per member: not read",
                         hint=COPY_HINT) from exc


def _pax_bytes(headers: dict[str, str]) -> int:
    return sum(len(key) + len(value) for key, value in headers.items())


def members(archive: Path, tar: tarfile.TarFile, size: int) -> list[tarfile.TarInfo]:
    """The archive's members (headers only, at most MAX_MEMBERS), each refused at once when its name or pax
    attributes are over their bounds, or its data would end past the archive (tarfile would take the end of the
    file for the end of the archive and hide what follows)."""
    found = []
    for member in tar:
        found.append(member)
        where = quoted(member.name[:200])[1:-1] if member.name else f"the member at byte {member.offset:,}"
        if len(found) > MAX_MEMBERS + 1:
            raise InputError(str(archive), f"holds more than {MAX_MEMBERS:,} members; a packed model holds one per "
                             "file (a few hundred at most)", hint=COPY_HINT)
        name_bytes = len(member.name.encode("utf-8", "surrogateescape"))
        if name_bytes > NAME_MAX_BYTES:
            raise InputError(str(archive), f"a member's name is {name_bytes:,} bytes long, over the "
                             f"{NAME_MAX_BYTES:,} any path may be: not read further", entry=where, hint=COPY_HINT)
        pax = max(_pax_bytes(member.pax_headers), _pax_bytes(tar.pax_headers))
        if pax > PAX_MAX_BYTES:
            raise InputError(str(archive), f"carries {pax:,} bytes of pax attributes, over the {PAX_MAX_BYTES:,} a "
                             "packed model's member needs: not read further", entry=where, hint=COPY_HINT)
        if member.isreg() and not member.issparse() and member.offset_data + member.size > size:
            raise InputError(str(archive), f"the archive ends inside this member (its header says {member.size:,} "
                             f"bytes, {max(0, size - member.offset_data):,} follow): truncated or damaged",
                             entry=where, hint=COPY_HINT)
    return found


def check_allocated(archive: Path, found: list[tarfile.TarInfo], info: os.stat_result) -> None:
    """The members' bytes against what the archive holds on disk, before any is hashed: a sparse archive claims any
    size for nothing, and where the file system cannot report its holes (`model_files.hole_at`) the blocks it
    allocated still tell. Twice the allocation is allowed (a compressing file system stores less than it holds); a
    file system that reports no blocks at all (some FUSE mounts) proves nothing."""
    claimed = sum(member.size for member in found if member.isreg() and not member.issparse())
    allocated = info.st_blocks * 512
    if allocated and claimed > max(2 * allocated, SPARSE_MIN_BYTES):
        raise InputError(str(archive), f"its members claim {claimed:,} bytes, but the archive has only "
                         f"{allocated:,} bytes on disk (its size says {info.st_size:,}): a sparse file, damaged or "
                         "planted; nothing was hashed", hint=COPY_HINT)


def name_problems(found: list[tarfile.TarInfo]) -> list[str]:
    """Two members of one name, whatever their types (unpacked, the later one replaces or merges into the earlier: a
    folder over a listed file), and members inside a member that is not a folder."""
    problems = []
    counts = Counter(member.name.rstrip("/") for member in found)
    for twice, count in sorted(counts.items()):
        if count > 1:
            times = "twice" if count == 2 else f"{count:,} times"
            problems.append(f"{quoted(twice)}: appears {times} in the archive, as members of any type (unpacked, a "
                            "later one replaces the earlier); a packed model names each file and folder once")
    not_folders = {member.name.rstrip("/") for member in found if not member.isdir()}
    for member in found:
        name = member.name.rstrip("/")
        parent = next((name[:cut] for cut in _slashes(name) if name[:cut] in not_folders), None)
        if parent is not None:
            problems.append(f"{shown(member)}: lies inside {quoted(parent)}, which the archive holds as a file")
    return problems


def _slashes(name: str) -> Iterator[int]:
    """Where the '/' of a name lie (each ends one of its parent folders' names)."""
    cut = name.find("/")
    while cut >= 0:
        yield cut
        cut = name.find("/", cut + 1)
