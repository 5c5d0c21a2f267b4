"""The registry path checked as input before DuckDB or a lock file touches it: a regular file or nothing yet, its
write-ahead log too, and links only where they cannot carry a write out of the folder named."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

from a2x_local.errors import UserError
from a2x_local.outfiles import describe_loop, kind_of

_PATH_HINT = "point --db (or $A2X_DB) at the registry file, or at a new path to create one"


def check_db_path(path: Path) -> None:
    """The registry path is input like any other: a regular file or nothing yet, and so is its write-ahead log beside
    it. Checked before DuckDB or a lock file touches anything: a named pipe blocked the open forever, a copy of
    /dev/full or /dev/null was opened for writing, and a link to nowhere would have the database created wherever
    it points.

    Links, because DuckDB writes through them (it resolves the database's link and keeps the log beside the
    target): the log is DuckDB's own file, created, overwritten and truncated in place, so no setup has a reason
    to link it, and a link there (even to a file beside it) had DuckDB overwrite its target; it is never a link.
    The database may be a link that resolves inside the folder holding it (`registry.duckdb ->
    registry-v2.duckdb`, to switch versions), never one that leads out of it: a command would write the registry
    and its log in a folder the operator never named (a planted link would aim a root job's writes anywhere). An
    operator who keeps the registry elsewhere links its folder instead, or names the file itself."""
    given = Path(path)
    target = Path(os.path.realpath(given))
    if given.is_symlink() and target.exists() and target.parent != Path(os.path.realpath(given.parent)):
        raise UserError(f"{given}: is a symbolic link to {target}, outside the folder that holds it; the registry "
                        "database is never followed out of its folder; nothing was written",
                        hint=f"point --db (or $A2X_DB) at {target} itself", code="BadDatabasePath")
    wal = target.with_name(target.name + ".wal")       # where DuckDB keeps it: beside the link's target
    if wal.is_symlink():
        pointed = os.readlink(wal)
        with contextlib.suppress(OSError):
            mode = os.stat(wal).st_mode
            pointed += ", a regular file" if stat.S_ISREG(mode) else f", {kind_of(mode)}"
        raise UserError(f"{wal}: the registry's write-ahead log is a symbolic link (to {pointed}); DuckDB "
                        "would overwrite whatever it points to, so it is never followed; nothing was written",
                        hint=f"remove the link {wal} (DuckDB creates the log itself)", code="BadDatabasePath")
    for where in (given, wal):
        try:
            mode = os.stat(where).st_mode
        except FileNotFoundError:
            if os.path.islink(where):
                raise UserError(f"{where}: is a broken symbolic link (to {os.readlink(where)}); the registry was "
                                "not created there", hint=_PATH_HINT, code="BadDatabasePath") from None
            continue
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise UserError(f"{where}: {describe_loop(Path(where))}; the registry cannot be opened through it, and "
                                "nothing was written", hint=_PATH_HINT + " (remove the looping link)",
                                code="BadDatabasePath") from None
            raise UserError(f"{where}: cannot use it as the registry database: {exc.strerror or exc}",
                            hint=_PATH_HINT, code="BadDatabasePath") from exc
        if not stat.S_ISREG(mode):
            raise UserError(f"{where}: is {kind_of(mode)}, not a regular file; the registry database (and its "
                            "write-ahead log beside it) must be a regular file or a new path; nothing was written",
                            hint=_PATH_HINT, code="BadDatabasePath")
        if where is given:
            _refuse_foreign_format(given)


# Databases of other programs that DuckDB would open through an extension, by the first bytes of their file.
_FOREIGN_MAGIC = {b"SQLite format 3\x00": "a SQLite database"}


def _refuse_foreign_format(path: Path) -> None:
    """A file of another database's format is not opened at all: DuckDB reads a SQLite file through an extension
    (which it would fetch from the network) as if it were its own."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)   # checked regular a moment ago: never wait on it
    try:
        head = os.read(descriptor, 16)
    finally:
        os.close(descriptor)
    for magic, what in _FOREIGN_MAGIC.items():
        if head.startswith(magic):
            raise UserError(f"{path}: is {what}, another program's database, not an a2x-local registry; it was not "
                            "opened or changed", hint="point --db (or $A2X_DB) at an a2x-local registry, or at a new "
                            "path to create one", code="ForeignDatabase")
