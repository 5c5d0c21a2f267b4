"""The one DuckDB file: opening it (waiting politely for other writers), forward-only migrations, transactions.

A long job (a nightly build) must not hold the file while it waits on a model, or every other command would be
locked out; callers therefore open, write and close around each checkpoint with ``connect``.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

import duckdb

from a2x_local.errors import DatabaseBusyError, UserError

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
    return applied


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


def _is_lock_error(exc: Exception) -> bool:
    text = str(exc).lower()
    return "lock" in text and ("conflicting" in text or "could not set" in text)


def open_database(path: Path, *, lock_timeout_s: float = 30.0) -> duckdb.DuckDBPyConnection:
    """Open (creating folders and file if needed) and migrate; wait up to ``lock_timeout_s`` for other writers."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + lock_timeout_s
    delay = 0.05
    while True:
        try:
            con = duckdb.connect(str(path))
            break
        except duckdb.IOException as exc:
            if not _is_lock_error(exc):
                raise UserError(f"{path}: cannot open the registry database: {exc}") from exc
            if time.monotonic() >= deadline:
                raise DatabaseBusyError(
                    f"{path}: another a2x-local process holds the database",
                    hint="wait for it to finish, or use --db to work on another database",
                ) from exc
            time.sleep(delay)
            delay = min(delay * 2, 1.0)
        except duckdb.Error as exc:
            raise UserError(f"{path}: not a usable DuckDB database: {exc}") from exc
    try:
        migrate(con)
    except BaseException:
        con.close()
        raise
    return con


@contextmanager
def connect(path: Path, *, lock_timeout_s: float = 30.0) -> Iterator[duckdb.DuckDBPyConnection]:
    """Open the database for the length of a block and always close it."""
    con = open_database(path, lock_timeout_s=lock_timeout_s)
    try:
        yield con
    finally:
        con.close()


def load_temp_table(con: duckdb.DuckDBPyConnection, name: str, columns: dict[str, str],
                    rows: Iterable[dict[str, object]]) -> int:
    """Fill a temporary table ``name`` with ``rows`` and return how many there were.

    Goes through a newline-delimited JSON file and DuckDB's reader: parameter binding (``executemany``) manages
    about a thousand rows a second, far too slow for registries of 100,000 services.
    """
    count = 0
    fd, tmp = tempfile.mkstemp(prefix="a2x-", suffix=".jsonl")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            for row in rows:
                handle.write(json.dumps(row, ensure_ascii=False))
                handle.write("\n")
                count += 1
        if count:
            spec = ", ".join(f"{column}: '{kind}'" for column, kind in columns.items())
            con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS SELECT * FROM read_json(?, "
                        f"format = 'newline_delimited', columns = {{{spec}}})", [tmp])
        else:
            definition = ", ".join(f"{column} {kind}" for column, kind in columns.items())
            con.execute(f"CREATE OR REPLACE TEMP TABLE {name} ({definition})")
    finally:
        os.unlink(tmp)
    return count
