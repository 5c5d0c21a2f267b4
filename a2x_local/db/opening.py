"""Opening the registry file: checked, waited for, read-only when it cannot be written, refused when damaged or
another program's, migrated; and `connect`, which holds it for one block and explains its failures.

A long job (a nightly build) must not hold the file while it waits on a model, or every other command would be
locked out; callers therefore open, write and close around each checkpoint with ``connect``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

import duckdb

from a2x_local.db.failures import RESTORE_HINT, damaged, translate
from a2x_local.db.integrity import damage, verify_blocks
from a2x_local.db.path import check_db_path
from a2x_local.db.schema import migrate, migrations, schema_version
from a2x_local.db.waiting import IN_PROCESS_WAIT_S, connect_when_free, held_in_process
from a2x_local.errors import ReadOnlyDatabaseError, UserError
from a2x_local.settings import packaged_default

Mode = Literal["read", "write"]


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
                                                hint=RESTORE_HINT) from exc
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
