"""Writing output files: every file a2x-local writes at a path it was given or chose (nightly reports, evaluation
runs, exported trees, plots, a build's kept round, logs) goes through here.

Only a regular file, or a path where nothing is yet, is ever written. A temporary file and a rename would otherwise
replace whatever sits at the path: run as root, ``--report /dev/null`` turned the device into a regular file, and a
named pipe a reader waits on would vanish. A symbolic link is followed and its target written (the link stays).
Whole files are written to a temporary file beside the target and renamed over it, so a reader never sees half a
file; the temporary file is removed whatever stops the write (an error, a full disk, Ctrl-C).
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from a2x_local.errors import UserError

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISSOCK, "a socket"))


def kind_of(mode: int) -> str:
    """What a non-regular file is, in words ("a folder", "a named pipe (FIFO)", ...)."""
    return next((words for test, words in _KINDS if test(mode)), "not a regular file")


def output_target(path: Path | str, *, what: str = "output file") -> Path:
    """The path to write ``path`` at: itself, or the target of its symbolic links; refused unless that is a regular
    file or absent (its folder is created)."""
    given = Path(path)
    target = Path(os.path.realpath(given))
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise UserError(f"{given}: cannot use it as the {what}: {exc.strerror or exc}",
                        hint="give a path in a folder you can write") from exc
    if mode is not None and not stat.S_ISREG(mode):
        shown = f"{given}" if target == given.absolute() else f"{given} (→ {target})"
        raise UserError(f"{shown}: is {kind_of(mode)}, not a regular file; the {what} was not written",
                        hint=f"give the {what} a file path (a new file, or a regular file to replace)")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"{given}: cannot create its folder {target.parent}: {exc.strerror or exc}",
                        hint="give a path in a folder you can write") from exc
    return target


def write_output(path: Path | str, content: str | bytes, *, what: str = "output file") -> Path:
    """Write ``content`` (text as UTF-8) to ``path`` whole or not at all; returns the path written."""
    target = output_target(path, what=what)
    data = content.encode("utf-8") if isinstance(content, str) else content
    tmp: str | None = None
    try:
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        output_target(target, what=what)   # still a regular file or absent: it may have changed meanwhile
        os.replace(tmp, target)
        tmp = None
    except OSError as exc:
        raise UserError(f"{path}: cannot write the {what}: {exc.strerror or exc}",
                        hint="check the free disk space and the folder's permissions") from exc
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
    return target


@contextmanager
def open_append(path: Path | str, *, what: str = "output file", buffering: int = -1) -> Iterator[IO[str]]:
    """``path`` opened to append text (created when absent), refused unless it is a regular file or absent; the
    file opened is checked again, so one swapped in meanwhile is refused too."""
    target = output_target(path, what=what)
    try:
        fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise UserError(f"{path}: cannot open the {what}: {exc.strerror or exc}",
                        hint="check the free disk space and the folder's permissions") from exc
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise UserError(f"{path}: is {kind_of(mode)}, not a regular file; the {what} was not written",
                        hint=f"give the {what} a file path")
    os.set_blocking(fd, True)
    with os.fdopen(fd, "a", encoding="utf-8", buffering=buffering) as handle:
        yield handle


def describe_loop(path: Path, steps: int = 8) -> str:
    """What loops, for an error about ``path`` that the system calls ELOOP: the chain of links from ``path`` back
    to one seen before (`self.duckdb -> self.duckdb`), or a folder on the way to it."""
    if not path.is_symlink():
        return "a folder on the way to it is a symbolic link that loops back on itself"
    chain, current, seen = [path.name], path, {os.path.normpath(path)}
    for _ in range(steps):
        target = os.readlink(current)
        chain.append(target)
        current = Path(os.path.normpath(current.parent / target))
        if str(current) in seen or not current.is_symlink():
            break
        seen.add(str(current))
    else:
        chain.append("…")
    return f"is a symbolic link loop ({' -> '.join(chain)})"
