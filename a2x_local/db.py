"""The one DuckDB file: opening it (waiting politely for other writers, read-only when it cannot be written,
checked for damage), forward-only migrations, transactions, and failures of the file explained.

A long job (a nightly build) must not hold the file while it waits on a model, or every other command would be
locked out; callers therefore open, write and close around each checkpoint with ``connect``.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import re
import stat
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Literal

import duckdb

from a2x_local import provenance
from a2x_local.errors import (
    A2XError,
    DatabaseBusyError,
    DatabaseDamagedError,
    DiskFullError,
    ReadOnlyDatabaseError,
    UserError,
)
from a2x_local.outfiles import describe_loop, kind_of
from a2x_local.settings import packaged_default

log = logging.getLogger("a2x_local.db")
# A wait for another process's hold on the file says so this often (a wait of minutes is never silent).
SPEAK_EVERY_S = 5.0
_MIGRATION_NAME = re.compile(r"^(\d{3})_([a-z0-9_]+)\.sql$")


def migrations() -> list[tuple[int, str, str]]:
    """(version, name, sql) for every migration shipped with the package, in order."""
    found = []
    for entry in resources.files("a2x_local.migrations").iterdir():
        match = _MIGRATION_NAME.match(entry.name)
        if match:
            found.append((int(match.group(1)), match.group(2), entry.read_text(encoding="utf-8")))
    found.sort()
    versions = [version for version, _, _ in found]
    if versions != list(range(1, len(found) + 1)):
        raise RuntimeError(f"migration numbers must be 1..n without gaps, found {versions}")
    return found


def schema_version(con: duckdb.DuckDBPyConnection) -> int:
    """Highest migration applied to this database (0 for a new file)."""
    exists = con.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = 'schema_migrations'"
    ).fetchone()[0]
    if not exists:
        return 0
    return con.execute("SELECT coalesce(max(version), 0) FROM schema_migrations").fetchone()[0]


def migrate(con: duckdb.DuckDBPyConnection) -> list[int]:
    """Apply the migrations this database lacks, each in its own transaction; return the versions applied."""
    con.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TIMESTAMP NOT NULL)"
    )
    current = schema_version(con)
    known = migrations()
    if current > len(known):
        raise UserError(
            f"database schema version {current} is newer than this a2x-local knows ({len(known)})",
            hint="upgrade a2x-local, or point --db at another database",
        )
    applied = []
    for version, name, sql in known[current:]:
        with transaction(con):
            con.execute(sql)
            con.execute("INSERT INTO schema_migrations VALUES (?, ?, now())", [version, name])
        applied.append(version)
    _record_software(con, current, len(known))
    return applied


def _record_software(con: duckdb.DuckDBPyConnection, schema_from: int, schema_to: int) -> None:
    """Add the running install to the file's software history when it differs from the last one recorded."""
    me = provenance.current()
    last = con.execute("SELECT version, commit_id, dirty, bundle_id FROM software_history"
                       " ORDER BY seen_at DESC LIMIT 1").fetchone()
    if schema_from == schema_to and last == (me.version, me.commit, me.dirty, me.bundle_id):
        return
    with transaction(con):
        con.execute("INSERT INTO software_history VALUES (now(), ?, ?, ?, ?, ?, ?)",
                    [me.version, me.commit, me.dirty, me.bundle_id, schema_from, schema_to])


def software_history(con: duckdb.DuckDBPyConnection) -> list[dict[str, object]]:
    """The installs that created or upgraded this file, oldest first, after the migrations older installs applied
    before the history was kept (those have no software recorded)."""
    rows: list[dict[str, object]] = []
    recorded = con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'software_history'"
                           ).fetchone()[0]
    first = con.execute("SELECT min(schema_from) FROM software_history").fetchone()[0] if recorded else None
    untracked = con.execute("SELECT version, name, applied_at FROM schema_migrations WHERE version <= ? ORDER BY 1",
                            [first if first is not None else 1 << 30]).fetchall()
    rows += [{"seen_at": str(at), "software": None, "schema_from": version - 1, "schema_to": version,
              "note": f"migration {version} ({name}) by an install that kept no history"}
             for version, name, at in untracked]
    if recorded:
        for seen_at, version, commit, dirty, bundle, schema_from, schema_to in con.execute(
                "SELECT * FROM software_history ORDER BY seen_at").fetchall():
            software = provenance.Provenance(version, commit, dirty, bundle)
            rows.append({"seen_at": str(seen_at), "software": software.describe(), "version": version,
                         "commit": commit, "dirty": dirty, "bundle_id": bundle, "schema_from": schema_from,
                         "schema_to": schema_to})
    return rows


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """All or nothing: commit when the block ends normally, roll back on any exception."""
    con.execute("BEGIN TRANSACTION")
    try:
        yield con
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


def is_lock_error(exc: Exception) -> bool:
    """DuckDB refused the file because another process holds it (a writer's lock): worth waiting for."""
    text = str(exc).lower()
    return "lock" in text and ("conflicting" in text or "could not set" in text)


def connect_when_free(path: Path, *, read_only: bool, wait_s: float, busy: str, hint: str,
                      first_delay: float = 0.05, max_delay: float = 1.0) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection to ``path``, tried again with a doubling pause while another process holds the file's
    lock, for up to ``wait_s``; then `DatabaseBusyError` (``busy``, ``hint``). Any other error is raised as is."""
    started = time.monotonic()
    deadline, note = started + wait_s, started + SPEAK_EVERY_S
    delay = first_delay
    while True:
        try:
            con = duckdb.connect(str(path), read_only=read_only)
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


Mode = Literal["read", "write"]

# DuckDB's main header and its two database headers (4 KiB each) come before the first block of the file.
HEADER_BYTES = 3 * 4096
_FULL_WORDS = ("no space left", "file too large", "disk quota")
_READ_ONLY_WORDS = ("permission denied", "read-only file system", "read only file system")
_DAMAGE_WORDS = ("could not read enough bytes", "checksum", "corrupt", "not a valid duckdb database")
_RESTORE_HINT = ("restore the file from a backup, or move it aside and ingest your sources again (`a2x-local ingest"
                 " PATH --db NEW`); DuckDB's own CLI can copy out what is still readable: duckdb -readonly FILE"
                 " \"EXPORT DATABASE 'folder'\"")


def damaged(path: Path, detail: str) -> DatabaseDamagedError:
    return DatabaseDamagedError(f"{path}: the registry database is damaged ({detail}); it was not changed",
                                hint=_RESTORE_HINT)


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


def damage(con: duckdb.DuckDBPyConnection, path: Path) -> str | None:
    """Why this file cannot hold what its catalogue describes, else None: a cheap check on every open.

    A truncated file still opens, and reads fail (or, worse, succeed on the blocks that remain) only when a query
    reaches a missing block; every stored column segment must lie inside the file.
    """
    block_size = int(con.execute("PRAGMA database_size").fetchone()[2])
    tables = [row[0] for row in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database()").fetchall()]
    if not tables or not block_size:
        return None
    union = " UNION ALL ".join(
        f"SELECT max(block_id) AS b FROM pragma_storage_info('{name}') WHERE persistent" for name in tables)
    highest = con.execute(f"SELECT max(b) FROM ({union})").fetchone()[0]
    size = path.stat().st_size
    if highest is not None and size < HEADER_BYTES + (int(highest) + 1) * block_size:
        return f"the file is {size:,} bytes, but its data reaches block {highest} of {block_size:,} bytes: truncated"
    return None


def verify_blocks(con: duckdb.DuckDBPyConnection) -> None:
    """Read every stored column of every table, so DuckDB checks each block's checksum (raises when one fails).

    One pass over the file, done before a command changes the registry, so a damaged file is refused rather than
    written into."""
    for (name,) in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database()").fetchall():
        con.execute(f'SELECT bit_xor(hash(COLUMNS(*))) FROM "{name}"').fetchall()


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


def open_database(path: Path, *, lock_timeout_s: float | None = None, mode: Mode = "write",
                  verify: bool = False) -> duckdb.DuckDBPyConnection:
    """Open (creating folders and file if needed), check and migrate; wait up to ``lock_timeout_s`` for other writers
    (commands pass `settings.lock_timeout_s`; None: the packaged `[registry] lock_timeout_s`).

    ``mode="read"``: the caller only reads, so a file that cannot be written is opened read-only (and must then
    need no migration). A truncated file is refused either way; ``verify`` also reads every block first.
    """
    path = Path(path)
    check_db_path(path)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
    read_only = mode == "read" and path.exists() and not os.access(path, os.W_OK)
    while True:
        try:
            con = connect_when_free(path, read_only=read_only, wait_s=_wait_s(lock_timeout_s),
                                    busy=f"{path}: another a2x-local process holds the database",
                                    hint="wait for it to finish, or use --db to work on another database")
            break
        except duckdb.IOException as exc:
            error = translate(exc, path)
            if isinstance(error, ReadOnlyDatabaseError) and mode == "read" and not read_only and path.exists():
                read_only = True
                continue
            raise error or UserError(f"{path}: cannot open the registry database: {exc}",
                                     hint="check the path given by --db (or $A2X_DB) and its permissions") from exc
        except duckdb.Error as exc:
            raise translate(exc, path) or UserError(f"{path}: not a usable DuckDB database: {exc}",
                                                    hint="--db must name an a2x-local registry (a DuckDB file), or"
                                                    " a new path to create one") from exc
    try:
        problem = damage(con, path)
        if problem:
            raise damaged(path, problem)
        _require_ours(con, path)
        if verify:
            verify_blocks(con)
        if read_only:
            _require_current(con, path)
        else:
            migrate(con)
    except duckdb.Error as exc:
        con.close()
        raise translate(exc, path) or UserError(f"{path}: cannot use the registry database: {exc}",
                                                hint=_RESTORE_HINT) from exc
    except BaseException:
        con.close()
        raise
    return con


def _wait_s(lock_timeout_s: float | None) -> float:
    return float(packaged_default("registry", "lock_timeout_s")) if lock_timeout_s is None else lock_timeout_s


def _require_ours(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """A DuckDB file of another program (tables, but none of a2x-local's bookkeeping) is never migrated into."""
    if schema_version(con):
        return
    tables = [row[0] for row in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() ORDER BY table_name"
        " LIMIT 4").fetchall()]
    if tables:
        shown = ", ".join(tables[:3]) + (", ..." if len(tables) > 3 else "")
        raise UserError(f"{path}: a DuckDB database of another program (tables {shown}), not an a2x-local registry;"
                        " it was not changed", hint="point --db at an a2x-local registry, or at a new path to create"
                                                   " one", code="ForeignDatabase")


def _require_current(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """A file opened read-only cannot be migrated: it must already have this version's schema."""
    current, latest = schema_version(con), len(migrations())
    if current < latest:
        raise ReadOnlyDatabaseError(f"{path}: the registry database needs an upgrade (schema {current} to {latest}),"
                                    " which needs write access, and it is read-only",
                                    hint="open it once with write access (any command), or copy it and use --db")
    if current > latest:
        raise UserError(f"database schema version {current} is newer than this a2x-local knows ({latest})",
                        hint="upgrade a2x-local, or point --db at another database")


@contextmanager
def connect(path: Path, *, lock_timeout_s: float | None = None, mode: Mode = "write",
            verify: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
    """Open the database for the length of a block and always close it; a failure of the file (damaged, full disk,
    read-only) inside the block becomes one explained error. Other threads of this process wait for the block
    (`held_in_process`)."""
    # Another thread's connection block is short (reads and writes, never a model's work): worth a longer wait than
    # another process's hold, which may last a whole job.
    wait_s = max(_wait_s(lock_timeout_s), IN_PROCESS_WAIT_S)
    with held_in_process(path, wait_s=wait_s, busy=f"{path}: another thread of this process holds the database",
                         hint="wait for it to finish, or use --db to work on another database"):
        con = open_database(path, lock_timeout_s=lock_timeout_s, mode=mode, verify=verify)
        try:
            yield con
        except (duckdb.Error, OSError) as exc:
            error = translate(exc, Path(path))
            if error is None:
                raise
            raise error from exc
        finally:
            con.close()


_JSON_OBJECT_BYTES = 16 * 1024 * 1024


def load_temp_table(con: duckdb.DuckDBPyConnection, name: str, columns: dict[str, str],
                    rows: Iterable[dict[str, object]]) -> int:
    """Fill a temporary table ``name`` with ``rows`` and return how many there were.

    Goes through a newline-delimited JSON file and DuckDB's reader: parameter binding (``executemany``) manages
    about a thousand rows a second, far too slow for registries of 100,000 services.
    """
    count = longest = 0
    fd, tmp = tempfile.mkstemp(prefix="a2x-", suffix=".jsonl")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            for row in rows:
                line = json.dumps(row, ensure_ascii=False)
                handle.write(line)
                handle.write("\n")
                count += 1
                longest = max(longest, len(line))
        if count:
            spec = ", ".join(f"{column}: '{kind}'" for column, kind in columns.items())
            # DuckDB refuses JSON objects over 16 MiB by default; a row may be as large as the limits allow.
            size = max(_JSON_OBJECT_BYTES, 4 * longest + 1024)
            con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS SELECT * FROM read_json(?, "
                        f"format = 'newline_delimited', columns = {{{spec}}}, maximum_object_size = {size})", [tmp])
        else:
            definition = ", ".join(f"{column} {kind}" for column, kind in columns.items())
            con.execute(f"CREATE OR REPLACE TEMP TABLE {name} ({definition})")
    finally:
        os.unlink(tmp)
    return count
