"""One nightly job per database: an advisory lock file next to it, released by the kernel if the job dies."""

from __future__ import annotations

from a2x_local.errors import UserError
from a2x_local.taxonomy import DatabaseLock

EXIT_BUSY = 4


class NightlyBusyError(UserError):
    """Another nightly job holds this database's lock; exit code 4 tells a scheduler "skipped, not failed"."""

    exit_code = EXIT_BUSY


class NightlyLock(DatabaseLock):
    """Held for the whole job (sync, build or update, gate, retention); a second job is refused at once.

    Separate from the build lock, which the build and the update inside the job take for themselves.
    """

    suffix = "nightly"

    def busy_error(self, held_by: str) -> UserError:
        return NightlyBusyError(f"another nightly job is running on {self.db_path}{held_by}",
                                hint="it ends on its own; this run was skipped (exit code 4)")
