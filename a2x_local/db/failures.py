"""What DuckDB's failures mean: a lock another process holds (worth waiting for), a damaged file, a full disk or a
file that cannot be written, each turned into the one error a user reads."""

from __future__ import annotations

import errno
from pathlib import Path

import duckdb

from a2x_local.errors import A2XError, DatabaseDamagedError, DiskFullError, ReadOnlyDatabaseError

_FULL_WORDS = ("no space left", "file too large", "disk quota")
_READ_ONLY_WORDS = ("permission denied", "read-only file system", "read only file system")
_DAMAGE_WORDS = ("could not read enough bytes", "checksum", "corrupt", "not a valid duckdb database")
RESTORE_HINT = ("restore the file from a backup, or move it aside and ingest your sources again (`a2x-local ingest"
                " PATH --db NEW`); DuckDB's own CLI can copy out what is still readable: duckdb -readonly FILE"
                " \"EXPORT DATABASE 'folder'\"")


def is_lock_error(exc: Exception) -> bool:
    """DuckDB refused the file because another process holds it (a writer's lock): worth waiting for."""
    text = str(exc).lower()
    return "lock" in text and ("conflicting" in text or "could not set" in text)


def damaged(path: Path, detail: str) -> DatabaseDamagedError:
    return DatabaseDamagedError(f"{path}: the registry database is damaged ({detail}); it was not changed",
                                hint=RESTORE_HINT)


def translate(exc: BaseException, path: Path) -> A2XError | None:
    """The user-facing error for a failure of the database file or of the disk under it, or None."""
    text = str(exc).lower()
    line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    full_errno = isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)
    if full_errno or any(word in text for word in _FULL_WORDS):
        where = getattr(exc, "filename", None) or path
        return DiskFullError(f"{where}: no space left to write ({line}); the change was rolled back",
                             hint="free disk space (or raise the file-size limit) and run the command again")
    if not isinstance(exc, duckdb.Error):
        return None
    if any(word in text for word in _DAMAGE_WORDS):
        return damaged(path, line)
    if any(word in text for word in _READ_ONLY_WORDS) or "read-only mode" in text:
        return ReadOnlyDatabaseError(f"{path}: the registry database cannot be written ({line})",
                                     hint="reading commands (stats, services, search, tree list) still work; to change"
                                     " it, make the file and its folder writable, or work on a copy with --db")
    return None
