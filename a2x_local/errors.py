"""Errors that reach users. Every one carries a message that names what went wrong and a hint for what to do.

Messages quote what they are about, and what they quote may be hostile: a 5 MB category name in a tree import was
repeated whole in its error. So every message and hint is cut at `MAX_MESSAGE_CHARS`, and the places an input error
names (file, entry, field) at `MAX_QUOTE_CHARS` each, saying how much was left out.
"""

from __future__ import annotations

MAX_MESSAGE_CHARS = 2000
MAX_QUOTE_CHARS = 200


def cut(text: str, limit: int) -> str:
    """``text``, or its first ``limit`` characters and how many more there were."""
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text) - limit:,} more characters)"


class A2XError(Exception):
    """Base of every error a2x-local reports to a user; ``exit_code`` is what the CLI exits with."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None, code: str | None = None) -> None:
        message = cut(message, MAX_MESSAGE_CHARS)
        super().__init__(message)
        self.message = message
        self.hint = None if hint is None else cut(hint, MAX_MESSAGE_CHARS)
        self.code = code or type(self).__name__

    def to_dict(self) -> dict[str, str | None]:
        """Structured form for `--json` output and server callers."""
        return {"error": self.code, "message": self.message, "hint": self.hint}


class UserError(A2XError):
    """Bad input, a missing file or model, a state the user must fix: exit code 1."""


class InputError(UserError):
    """A malformed input file; the message names the file, the entry and the field."""

    def __init__(self, file: str, message: str, *, entry: str | int | None = None, field: str | None = None,
                 hint: str | None = None) -> None:
        where = [cut(file, MAX_QUOTE_CHARS)]
        if entry is not None:
            where.append(f"entry {cut(str(entry), MAX_QUOTE_CHARS)}")
        if field is not None:
            where.append(f"field '{cut(field, MAX_QUOTE_CHARS)}'")
        super().__init__(f"{': '.join(where)}: {message}", hint=hint, code="InputError")
        self.file = file
        self.entry = entry
        self.field = field


class DatabaseBusyError(UserError):
    """Another process holds the registry database for writing."""


class BuildRunningError(UserError):
    """A build is already running on this database."""


class DatabaseDamagedError(UserError):
    """The registry file fails its integrity check or a read inside it fails (truncated, corrupted blocks)."""


class ReadOnlyDatabaseError(UserError):
    """The registry file (or its folder) cannot be written; reading commands still open it read-only."""


class DiskFullError(UserError):
    """A write failed for lack of space (or a file-size limit); the transaction was rolled back."""


class UsageError(A2XError):
    """The command line itself is wrong (an unknown option, a missing argument, a value outside the choices): exit
    code 2."""

    exit_code = 2


class InternalError(A2XError):
    """An unexpected failure: a bug in a2x-local, reported as one line (exit code 3) instead of a traceback."""

    exit_code = 3


class Interrupted(A2XError):
    """The user pressed Ctrl-C (SIGINT): exit code 130, as shells expect."""

    exit_code = 130
