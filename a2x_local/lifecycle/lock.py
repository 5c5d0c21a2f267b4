"""One nightly job per database: an advisory lock file next to it, released by the kernel if the job dies."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from a2x_local.errors import UserError

EXIT_BUSY = 4


class NightlyBusyError(UserError):
    """Another nightly job holds this database's lock; exit code 4 tells a scheduler "skipped, not failed"."""

    exit_code = EXIT_BUSY


class NightlyLock:
    """Held for the whole job (sync, build or update, gate, retention); a second job is refused at once.

    Separate from the build lock, which the build and the update inside the job take for themselves.
    """

    def __init__(self, db_path: Path) -> None:
        self.db_path = Path(db_path)
        self.path = Path(f"{db_path}.nightly.lock")
        self._fd: int | None = None

    def __enter__(self) -> NightlyLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip()
            os.close(fd)
            raise NightlyBusyError(
                f"another nightly job is running on {self.db_path}" + (f" (process {holder})" if holder else ""),
                hint="it ends on its own; this run was skipped (exit code 4)") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._fd = fd
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
