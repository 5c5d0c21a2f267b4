"""Advisory lock files next to the registry database: one job of a kind at a time, and one writer of the registry;
and one beside a model folder while it is written (`ModelFolderLock`).

`fcntl.flock` is released by the kernel when the holding process dies, so a killed job never leaves a stale lock
behind (a pid file alone would). DuckDB's own file lock covers one write at a time; these cover whole jobs, whose
writes are minutes or hours apart (a nightly syncs, builds for an hour, then activates).
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar, Self

from a2x_local.db import check_db_path
from a2x_local.errors import DatabaseBusyError, UserError
from a2x_local.outfiles import kind_of

log = logging.getLogger("a2x_local.locks")
# A writer waiting for the registry lock says so this often, naming the holder (a wait of minutes is never silent).
SPEAK_EVERY_S = 5.0


class DatabaseLock:
    """Held for a whole job; a second job of the same kind on the same database is refused at once.

    A kind of job sets `suffix` (the file is `<db>.<suffix>.lock`) and `busy_error`, what the refused job is told.
    The lock file holds the holder's process id (and its job), so the refusal can name it.
    """

    suffix: ClassVar[str]

    def __init__(self, db_path: Path, job: str = "") -> None:
        self.db_path = Path(db_path)
        self.path = self.path_for(self.db_path)
        self.job = job
        self._fd: int | None = None

    @classmethod
    def path_for(cls, db_path: Path) -> Path:
        return Path(f"{db_path}.{cls.suffix}.lock")

    def busy_error(self, held_by: str) -> UserError:
        """The error for a job refused because another holds the lock; `held_by` is " (process N)" or ""."""
        raise NotImplementedError

    def _open(self) -> int:
        """The lock file, created when absent. The database path is checked first (nothing is created beside a
        named pipe or a device), and the lock file must be a regular file itself: it is truncated and written, so
        through a link it would overwrite whatever the link names."""
        self._check_target()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise
            raise UserError(f"{self.path}: is a symbolic link; the lock file is written, so it is never followed",
                            hint="remove the link (no a2x-local job makes one)", code="BadLockFile") from exc
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            os.close(fd)
            raise UserError(f"{self.path}: is {kind_of(mode)}, not a regular file", code="BadLockFile",
                            hint="remove it (a2x-local makes its lock files itself)")
        os.set_blocking(fd, True)
        return fd

    def _check_target(self) -> None:
        """What the lock guards must be what a job of this kind may write (here: a database file, or a new path)."""
        check_db_path(self.db_path)

    def _try(self, fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def _refuse(self, fd: int) -> UserError:
        holder = os.pread(fd, 200, 0).decode(errors="replace").strip()
        os.close(fd)
        return self.busy_error(f" ({holder})" if holder else "")

    def _hold(self, fd: int) -> None:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"process {os.getpid()}{f': {self.job}' if self.job else ''}".encode(), 0)
        self._fd = fd

    def acquire(self) -> Self:
        fd = self._open()
        if not self._try(fd):
            raise self._refuse(fd) from None
        self._hold(fd)
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


class RegistryBusyError(DatabaseBusyError):
    """Another job is changing the registry (an ingest, a sync, a build, an update, a nightly ...)."""


class RegistryLock(DatabaseLock):
    """The one registry write lock: every job that changes services or trees holds it for the whole job (ingest,
    sync, build, update, activate, import, delete, remove, nightly). A second writer waits up to ``wait_s`` for it,
    then is refused with `RegistryBusyError` (exit code 1) naming the holder.

    Re-entrant within a process: the nightly job holds it and the sync, build or update it runs take it again.
    A registry whose folder cannot be written cannot hold the lock file; nothing can write it either, so the job
    goes on without one and the database open says the file is read-only.
    """

    suffix = "write"
    _held: ClassVar[dict[str, tuple[int, int]]] = {}      # lock file -> (descriptor, depth) in this process
    _guard: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, db_path: Path, job: str = "", *, wait_s: float = 0.0) -> None:
        super().__init__(db_path, job)
        self.wait_s = wait_s
        self._key = os.path.realpath(self.path)
        self._counted = False

    def busy_error(self, held_by: str) -> UserError:
        return RegistryBusyError(f"another a2x-local job is changing the registry {self.db_path}{held_by}; waited"
                                 f" {self.wait_s:g} s", code="RegistryBusy",
                                 hint="run this again when that job has finished ([registry] lock_timeout_s sets"
                                      " how long a writer waits)")

    def acquire(self) -> Self:
        with self._guard:
            held = self._held.get(self._key)
            if held is not None:
                self._held[self._key] = (held[0], held[1] + 1)
                self._counted = True
                return self
        try:
            fd = self._open()
        except OSError as exc:
            if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
                return self     # a read-only place: nothing can change the registry there
            if exc.errno == errno.ENAMETOOLONG:
                raise UserError(f"{self.path}: cannot create the registry's lock file: its name is too long (the "
                                "registry's name with '.write.lock', and with '.wal', must fit the "
                                f"{_name_max(self.path)} bytes a file name may have here); nothing was written",
                                hint="give the registry a shorter name (--db)", code="BadDatabasePath") from exc
            raise UserError(f"{self.path}: cannot create the registry's lock file: {exc.strerror or exc}",
                            hint="check the folder of the database (--db)") from exc
        started = time.monotonic()
        deadline, note = started + self.wait_s, started + SPEAK_EVERY_S
        delay = 0.05
        while not self._try(fd):
            now = time.monotonic()
            if now >= deadline:
                raise self._refuse(fd) from None
            if now >= note:
                note += SPEAK_EVERY_S
                holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"
                log.warning("waiting for the registry write lock, held by %s (%.0f s of at most %g s: [registry] "
                            "lock_timeout_s)", holder, now - started, self.wait_s)
            time.sleep(min(delay, max(0.0, deadline - now)))
            delay = min(delay * 2, 0.5)
        self._hold(fd)
        with self._guard:
            self._held[self._key] = (fd, 1)
            self._counted = True
        return self

    def release(self) -> None:
        if not self._counted:
            return
        self._counted = False
        with self._guard:
            fd, depth = self._held[self._key]
            if depth > 1:
                self._held[self._key] = (fd, depth - 1)
                return
            del self._held[self._key]
        self._fd = fd
        super().release()


class ModelFolderLock(DatabaseLock):
    """Held while a model folder is written (`models import`, a packaged model's first use), so that two processes
    that both need the folder convert it once: the second waits (`acquire_waiting`) and then finds it written.
    The lock file is hidden beside the folder: `.NAME.import.lock`.
    """

    suffix = "import"

    @classmethod
    def path_for(cls, db_path: Path) -> Path:
        return db_path.parent / f".{db_path.name}.{cls.suffix}.lock"

    def _check_target(self) -> None:
        """The model folder: a folder (an import replaces it) or a new path, never a file or a special file."""
        if self.db_path.is_symlink() or (self.db_path.exists() and not self.db_path.is_dir()):
            raise UserError(f"{self.db_path}: is not a folder; a model is imported into a folder or a new path",
                            hint="choose another --name, or move what is there out of the models folder",
                            code="ModelBusy")

    def busy_error(self, held_by: str) -> UserError:
        return UserError(f"another a2x-local process is writing the model folder {self.db_path}{held_by}",
                         code="ModelBusy", hint="wait until it has finished, then run this again")

    def acquire_waiting(self, wait_s: float, on_wait: Callable[[str], None] = lambda _: None) -> Self:
        """Take the lock, waiting up to ``wait_s`` for a holder; ``on_wait`` is told once who holds it."""
        try:
            fd = self._open()
        except OSError as exc:
            raise UserError(f"{self.path}: cannot create the lock file: {exc.strerror or exc}",
                            hint="check that the models folder can be written ($A2X_MODELS_DIR)") from exc
        deadline = time.monotonic() + wait_s
        delay, told = 0.05, False
        while not self._try(fd):
            if not told:
                on_wait(os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process")
                told = True
            if time.monotonic() >= deadline:
                raise self._refuse(fd) from None
            time.sleep(delay)
            delay = min(delay * 2, 1.0)
        self._hold(fd)
        return self


def _name_max(path: Path) -> int:
    """The longest file name the folder of ``path`` takes, in bytes (255 on most file systems)."""
    try:
        return os.pathconf(path.parent, "PC_NAME_MAX")
    except (OSError, ValueError):
        return 255
