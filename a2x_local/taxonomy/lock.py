"""One job of a kind per database at a time: an advisory lock file next to the database.

`fcntl.flock` is released by the kernel when the holding process dies, so a killed job never leaves a stale
lock behind (a pid file alone would).
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import ClassVar, Self

from a2x_local.errors import BuildRunningError, UserError


class DatabaseLock:
    """Held for a whole job; a second job of the same kind on the same database is refused at once.

    A kind of job sets `suffix` (the file is `<db>.<suffix>.lock`) and `busy_error`, what the refused job is told.
    The lock file holds the holder's process id, so the refusal can name it.
    """

    suffix: ClassVar[str]

    def __init__(self, db_path: Path) -> None:
        self.db_path = Path(db_path)
        self.path = self.path_for(self.db_path)
        self._fd: int | None = None

    @classmethod
    def path_for(cls, db_path: Path) -> Path:
        return Path(f"{db_path}.{cls.suffix}.lock")

    def busy_error(self, held_by: str) -> UserError:
        """The error for a job refused because another holds the lock; `held_by` is " (process N)" or ""."""
        raise NotImplementedError

    def acquire(self) -> Self:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip()
            os.close(fd)
            raise self.busy_error(f" (process {holder})" if holder else "") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> Self:
        return self.acquire()

    def __exit__(self, *exc_info: object) -> None:
        self.release()


class BuildLock(DatabaseLock):
    """Held for the whole build; a second build on the same database is refused at once."""

    suffix = "build"

    def busy_error(self, held_by: str) -> UserError:
        return BuildRunningError(f"another build is already running on {self.db_path}{held_by}",
                                 hint="wait for it to finish; `a2x-local tree list` shows its progress")


def build_running(db_path: Path) -> bool:
    """True while some process holds the build lock of this database.

    Only looks: the lock file is opened read-only and never created, so this works on a read-only registry."""
    try:
        fd = os.open(BuildLock.path_for(Path(db_path)), os.O_RDONLY)
    except OSError:
        return False    # no lock file: no build ever ran here (a running build always has one)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False
