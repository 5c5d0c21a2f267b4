"""One build per database at a time: an advisory lock file next to the database (`a2x_local.locks`)."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from a2x_local.errors import BuildRunningError, UserError
from a2x_local.locks import DatabaseLock

__all__ = ["BuildLock", "DatabaseLock", "build_running"]


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
        # Never blocking (a named pipe put there) and never through a link.
        fd = os.open(BuildLock.path_for(Path(db_path)), os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False    # no lock file: no build ever ran here (a running build always has one)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False
