"""Waiting for the file while someone else holds it: another process's DuckDB lock (tried again, with a word every
few seconds), and one connection at a time among the threads of this process."""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from a2x_local.db.failures import is_lock_error
from a2x_local.errors import DatabaseBusyError

log = logging.getLogger("a2x_local.db")
# No connection installs or loads an extension by itself: given a SQLite file, DuckDB went to extensions.duckdb.org
# for its sqlite scanner (the network at run time) and would have opened another program's database as the registry.
NO_EXTENSIONS = {"autoinstall_known_extensions": False, "autoload_known_extensions": False,
                 "allow_community_extensions": False}
# A wait for another process's hold on the file says so this often (a wait of minutes is never silent).
SPEAK_EVERY_S = 5.0


def connect_when_free(path: Path, *, read_only: bool, wait_s: float, busy: str, hint: str,
                      first_delay: float = 0.05, max_delay: float = 1.0) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection to ``path``, tried again with a doubling pause while another process holds the file's
    lock, for up to ``wait_s``; then `DatabaseBusyError` (``busy``, ``hint``). Any other error is raised as is."""
    started = time.monotonic()
    deadline, note = started + wait_s, started + SPEAK_EVERY_S
    delay = first_delay
    while True:
        try:
            con = duckdb.connect(str(path), read_only=read_only, config=dict(NO_EXTENSIONS))
        except duckdb.Error as exc:
            if not is_lock_error(exc):
                raise
            now = time.monotonic()
            if now >= deadline:
                raise DatabaseBusyError(busy, hint=hint) from exc
            if now >= note:
                note += SPEAK_EVERY_S
                held = re.search(r"lock is held in .*", str(exc))
                log.warning("waiting for %s, which another process holds (%s; %.0f s of at most %g s)", path,
                            held.group(0).rstrip(".") if held else "DuckDB's file lock", now - started, wait_s)
            time.sleep(min(delay, max(0.0, deadline - now)))
            delay = min(delay * 2, max_delay)
            continue
        # DuckDB draws a progress bar on stdout for a query past 2 s, terminal or not: on a slow machine it landed
        # in the middle of `--json` output.
        con.execute("SET enable_progress_bar = false")
        return con


IN_PROCESS_WAIT_S = 60.0
_FILES: dict[str, threading.RLock] = {}
_FILES_GUARD = threading.Lock()


@contextmanager
def held_in_process(path: Path, *, wait_s: float, busy: str, hint: str) -> Iterator[None]:
    """One open connection to a database file at a time in this process, for the length of a block: DuckDB refuses a
    read-only and a read-write connection to one file in one process at once, and a server's threads (a method's
    index build, a snapshot reload) each open their own. Held only while a connection is open, never while a
    caller computes (a build embeds with no connection), so no thread waits for another's long work. Re-entrant;
    after ``wait_s``, `DatabaseBusyError`."""
    with _FILES_GUARD:
        lock = _FILES.setdefault(os.path.realpath(path), threading.RLock())
    if not lock.acquire(timeout=max(0.0, wait_s)):
        raise DatabaseBusyError(busy, hint=hint)
    try:
        yield
    finally:
        lock.release()
