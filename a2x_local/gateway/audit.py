"""The audit of gateway calls: every call, allowed or refused, becomes a row of the registry's `gateway_calls` table.

The server never holds the registry open (the nightly job must be able to write it): a row is appended at once to
the server's spool file beside the registry (`<db>.audit-spool-<pid>.jsonl`), and rows are moved into the table
together every `audit_flush_s` through a short write connection, under the server's one-connection lock. While the
registry is busy (another process writes it, or an index build of this one reads it) rows wait in the spool (at most
`audit_max_pending`; beyond that new calls are refused: an unaudited call is not made); a server that stops before
it could write them leaves its spool, and the next one takes it over. `a2x-local audit` shows spooled rows too.
Rows older than `audit_retention_days` are deleted as new ones are written.

What a row holds of a call's data: the SHA-256 of its arguments (canonical JSON) and a redacted preview (the keys and
the type and size of each value, never a value); the arguments' and the result's text only with `audit_text`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import stat
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, fields
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

import duckdb

from a2x_local.db import connect, load_temp_table, transaction
from a2x_local.errors import A2XError
from a2x_local.gateway.config import GatewayConfig
from a2x_local.outfiles import kind_of, open_append, write_output

log = logging.getLogger("a2x_local.gateway")
PREVIEW_CHARS = 300
OUTCOMES = ("ok", "tool_error", "denied", "invalid", "too_large", "failed", "timeout", "busy", "cancelled")
PRUNE_EVERY_S = 3600.0


@dataclass
class AuditRow:
    """One call as the audit table stores it (column for column)."""

    called_at: datetime
    profile: str
    client: str
    via: str
    service_id: str
    server: str | None
    tool: str | None
    arguments_sha256: str | None
    arguments_preview: str | None
    arguments_bytes: int | None
    duration_ms: float
    outcome: str
    result_bytes: int | None = None
    error: str | None = None
    arguments_text: str | None = None
    result_text: str | None = None


COLUMNS = [f.name for f in fields(AuditRow)]
_TYPES = {"called_at": "TIMESTAMP", "arguments_bytes": "INTEGER", "duration_ms": "DOUBLE", "result_bytes": "INTEGER"}


def canonical(arguments: Any) -> str:
    return json.dumps(arguments, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def arguments_digest(arguments: Any) -> str:
    return hashlib.sha256(canonical(arguments).encode("utf-8", "surrogatepass")).hexdigest()


def _shape(value: Any, depth: int = 0) -> Any:
    """A value with every leaf replaced by its type (and size): what was sent, never what it said."""
    if isinstance(value, dict):
        if depth >= 3:
            return f"<object {len(value)} keys>"
        return {str(key)[:40]: _shape(item, depth + 1) for key, item in list(value.items())[:20]}
    if isinstance(value, list):
        return f"<array {len(value)}>"
    if isinstance(value, str):
        return f"<string {len(value)}>"
    if isinstance(value, bool):
        return "<boolean>"
    if isinstance(value, int | float):
        return "<number>"
    return "<null>" if value is None else f"<{type(value).__name__}>"


def redacted_preview(arguments: Any) -> str:
    """The arguments' keys and the type and size of each value, e.g. {"city":"<string 5>","days":"<number>"}."""
    return canonical(_shape(arguments))[:PREVIEW_CHARS]


class AuditLog:
    """Collects rows and writes them to the registry in the background (see the module docstring).

    Each row is first appended to a spool file beside the registry (`<db>.audit-spool.jsonl`), so a row is kept
    the moment its call ends: rows not yet in the table survive a stop (the next server, or `a2x-local audit`,
    finds them) and `a2x-local audit` shows them at once. ``database`` is the lock held around every connection this
    process opens to the registry (DuckDB allows one kind of connection per file and process at a time); the writer
    only tries it, so a long index build delays the table, never a call. ``written`` is told after each write, so
    the server can take the file's new stamp as its own change rather than reload the registry.
    """

    def __init__(self, db_path: Path, config: GatewayConfig, *, database: Any = None,
                 written: Callable[[Callable[[], None]], None] | None = None, lock_timeout_s: float = 1) -> None:
        self.db_path = Path(db_path)
        self.spool = spool_path(self.db_path, os.getpid())
        self.config = config
        self._database = database if database is not None else threading.RLock()
        self._written = written
        self._lock_timeout_s = lock_timeout_s
        self._lock = threading.Lock()
        self._pending: deque[AuditRow] = deque(self._take_over())   # rows stopped servers left
        self._flushing = threading.Lock()
        self._wake = threading.Event()
        self._closed = threading.Event()
        self._pruned_at = 0.0
        self.written_rows = 0
        self.problem: str | None = None
        self._thread: threading.Thread | None = None
        self._spool_files = ExitStack()
        self._spool_file: IO[str] | None = None
        if self._pending:
            with self._lock:
                self._rewrite_spool()     # this server's spool holds them until they are in the table
            self.start()

    def _take_over(self) -> list[AuditRow]:
        """The rows of spools whose server is gone, moved into this one's (a rename: one taker each)."""
        rows: list[AuditRow] = []
        for path in sorted(self.db_path.parent.glob(self.db_path.name + ".audit-spool-*.jsonl")):
            pid = path.name.rsplit("-", 1)[-1].removesuffix(".jsonl")
            if not pid.isdigit() or (int(pid) != os.getpid() and _alive(int(pid))):
                continue
            problem = spool_problem(path)
            if problem is not None:        # not a spool a server wrote: named, neither taken over nor removed
                log.error("audit spool %s not taken over: %s", path, problem)
                continue
            claimed = path.with_name(f"{path.name}.{os.getpid()}.taken")
            try:
                path.rename(claimed)
            except OSError:
                continue
            rows += read_spool(claimed)
            claimed.unlink(missing_ok=True)
        if rows:
            log.info("audit: %d rows left by a stopped server taken over", len(rows))
        return rows

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="a2x-audit", daemon=True)
            self._thread.start()

    @property
    def pending(self) -> int:
        return len(self._pending)

    def full(self) -> bool:
        return len(self._pending) >= self.config.audit_max_pending

    def record(self, row: AuditRow) -> None:
        line = json.dumps(_jsonable(row), ensure_ascii=False) + "\n"
        with self._lock:
            self._pending.append(row)
            try:
                # Kept open between calls (opening and checking the file each time cost a call ~0.2 ms), line by
                # line in the kernel's hands at once; reopened after the spool is rewritten.
                if self._spool_file is None:
                    self._spool_file = self._spool_files.enter_context(open_append(self.spool, what="audit spool",
                                                                                   buffering=1))
                self._spool_file.write(line)
            except (OSError, A2XError) as exc:   # the table still gets it; only a stop before then would lose it
                self._close_spool_file()
                log.error("audit spool %s not written: %s", self.spool, getattr(exc, "message", exc))
        self.start()

    def _close_spool_file(self) -> None:
        self._spool_file = None
        try:
            self._spool_files.close()
        except OSError as exc:
            log.error("audit spool %s not closed: %s", self.spool, exc)

    def _run(self) -> None:
        while not self._closed.is_set():
            self._wake.wait(self.config.audit_flush_s)
            self._wake.clear()
            self.flush()

    def flush(self, wait_s: float = 0.2) -> int:
        """Write the rows held now into the table (and prune old ones, at most hourly); rows stay held (and in the
        spool) while the registry is busy, in this process (``wait_s`` for its lock) or another."""
        with self._flushing:        # the writer thread and a closing server never write the same rows twice
            return self._flush(wait_s)

    def _flush(self, wait_s: float) -> int:
        with self._lock:
            rows = list(self._pending)
        if not rows:     # old rows are pruned only when new ones are written: an idle server writes nothing
            return 0
        if not self._database.acquire(timeout=wait_s):
            return 0     # an index build holds the registry: next time
        try:
            self._write(rows)
        except A2XError as exc:
            if exc.message != self.problem:
                log.warning("audit rows not written yet (%d held): %s", len(rows), exc.message)
            self.problem = exc.message
            return 0
        except (duckdb.Error, OSError) as exc:
            if str(exc) != self.problem:
                log.error("audit rows not written yet (%d held): %s", len(rows), exc)
            self.problem = str(exc)
            return 0
        finally:
            self._database.release()
        with self._lock:
            for _ in rows:
                self._pending.popleft()
            self._rewrite_spool()
        self.problem = None
        self.written_rows += len(rows)
        return len(rows)

    def _rewrite_spool(self) -> None:
        """The spool holds exactly the rows not yet in the table (whole or not at all)."""
        self._close_spool_file()        # the file is replaced: the next row opens the new one
        try:
            if not self._pending:
                self.spool.unlink(missing_ok=True)
                return
            write_output(self.spool, "".join(json.dumps(_jsonable(row), ensure_ascii=False) + "\n"
                                             for row in self._pending), what="audit spool")
        except (OSError, A2XError) as exc:
            log.error("audit spool %s not rewritten: %s", self.spool, getattr(exc, "message", exc))

    def _write(self, rows: list[AuditRow]) -> None:
        def write() -> None:
            with connect(self.db_path, lock_timeout_s=self._lock_timeout_s) as con, transaction(con):
                columns = {name: _TYPES.get(name, "VARCHAR") for name in COLUMNS}
                load_temp_table(con, "_audit", columns, (_jsonable(row) for row in rows))
                con.execute(f"INSERT INTO gateway_calls ({', '.join(COLUMNS)}) SELECT {', '.join(COLUMNS)} "
                            "FROM _audit")
                if time.monotonic() - self._pruned_at >= PRUNE_EVERY_S:
                    prune(con, self.config.audit_retention_days)
                    self._pruned_at = time.monotonic()

        if self._written is not None:
            self._written(write)
        else:
            write()

    def close(self) -> None:
        """Write what is held (waiting a few seconds for the registry) and stop the writer; what could not be
        written stays in the spool for the next server."""
        self._closed.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.flush(wait_s=5)
        with self._lock:
            self._close_spool_file()


def spool_path(db_path: Path, pid: int) -> Path:
    return Path(f"{db_path}.audit-spool-{pid}.jsonl")


def spools(db_path: Path) -> list[Path]:
    """Every server's spool beside the registry (rows not in the table yet)."""
    return sorted(Path(db_path).parent.glob(Path(db_path).name + ".audit-spool-*.jsonl"))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# A spool holds the rows its server has not written into the table yet: seconds' worth, more while the registry is
# held by another writer. A file past this is no spool a server wrote (a planted link to /dev/zero took 17.6 GB).
MAX_SPOOL_BYTES = 256 * 2**20


def spool_problem(path: Path) -> str | None:
    """Why the file named like a spool is not one to read or take over (a link, a named pipe, too big), else None;
    checked on the entry itself, never through a link."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    return _not_a_spool(info.st_mode, info.st_size)


def _not_a_spool(mode: int, size: int) -> str | None:
    if stat.S_ISLNK(mode):
        return "is a symbolic link, not a spool a server wrote; it is not followed"
    if not stat.S_ISREG(mode):
        return f"is {kind_of(mode)}, not a regular file"
    if size > MAX_SPOOL_BYTES:
        return f"is over the {MAX_SPOOL_BYTES:,} bytes a spool may hold ({size:,} or more)"
    return None


def read_spool(path: Path) -> list[AuditRow]:
    """The rows of a spool file (a line cut short by a crash is skipped). A file that is not a spool (a link, a
    named pipe, one past `MAX_SPOOL_BYTES`) is named in the log and left as it is: never followed, waited on or read
    whole."""
    rows = []
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return []
    except OSError as exc:
        log.error("audit spool %s not read: %s", path, spool_problem(path) or exc.strerror or exc)
        return []
    with os.fdopen(descriptor, "rb") as file:
        info = os.fstat(descriptor)          # the file opened: one swapped in since a listing is checked too
        problem = _not_a_spool(info.st_mode, info.st_size)
        data = file.read(MAX_SPOOL_BYTES + 1) if problem is None else b""
    problem = problem or _not_a_spool(info.st_mode, len(data))      # bounded while read: a file that grew
    if problem is not None:
        log.error("audit spool %s not read: %s", path, problem)
        return []
    for line in data.decode("utf-8", errors="replace").splitlines():
        try:
            data_row = json.loads(line)
            data_row["called_at"] = datetime.fromisoformat(data_row["called_at"])
            rows.append(AuditRow(**data_row))
        except (ValueError, TypeError, KeyError):
            log.warning("audit spool %s: a damaged line skipped", path)
    return rows


def _jsonable(row: AuditRow) -> dict[str, Any]:
    data = {name: getattr(row, name) for name in COLUMNS}     # dataclasses.asdict deep-copies: slower
    data["called_at"] = row.called_at.strftime("%Y-%m-%d %H:%M:%S.%f")
    return data


def prune(con: duckdb.DuckDBPyConnection, retention_days: float) -> int:
    """Delete rows older than the retention (0: keep every row); how many were deleted."""
    if retention_days <= 0:
        return 0
    cutoff = datetime.now(UTC).replace(tzinfo=None) - timedelta(days=retention_days)
    before = con.execute("SELECT count(*) FROM gateway_calls WHERE called_at < ?", [cutoff]).fetchone()[0]
    if before:
        con.execute("DELETE FROM gateway_calls WHERE called_at < ?", [cutoff])
    return int(before)


@dataclass(frozen=True)
class AuditFilter:
    """What `a2x-local audit` selects: since a time (UTC), by service glob, profile, outcome; newest first."""

    since: datetime | None = None
    service: str | None = None
    profile: str | None = None
    outcome: str | None = None
    limit: int | None = None


def query_audit(con: duckdb.DuckDBPyConnection, selection: AuditFilter,
                db_path: Path | None = None) -> list[dict[str, Any]]:
    """The rows that match, newest first, as dictionaries (times as ISO text); with ``db_path``, also the rows
    servers hold in their spools beside it and have not written into the table yet (their ``id`` is null)."""
    if db_path is not None:
        waiting = [row for path in spools(db_path) for row in read_spool(path)]
        if waiting:
            columns = {name: _TYPES.get(name, "VARCHAR") for name in COLUMNS}
            load_temp_table(con, "_spooled", columns, (_jsonable(row) for row in waiting))
            table = (f"(SELECT id, {', '.join(COLUMNS)} FROM gateway_calls UNION ALL "
                     f"SELECT NULL AS id, {', '.join(COLUMNS)} FROM _spooled)")
            return _query(con, selection, table)
    return _query(con, selection, "gateway_calls")


def _query(con: duckdb.DuckDBPyConnection, selection: AuditFilter, table: str) -> list[dict[str, Any]]:
    where, params = [], []
    if selection.since is not None:
        where.append("called_at >= ?")
        params.append(selection.since)
    if selection.service is not None:
        where.append("service_id GLOB ?")
        params.append(selection.service)
    if selection.profile is not None:
        where.append("profile = ?")
        params.append(selection.profile)
    if selection.outcome is not None:
        where.append("outcome = ?")
        params.append(selection.outcome)
    sql = f"SELECT id, {', '.join(COLUMNS)} FROM {table}"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY called_at DESC, id DESC NULLS FIRST"
    if selection.limit is not None:
        sql += f" LIMIT {int(selection.limit)}"
    cursor = con.execute(sql, params)
    names = [column[0] for column in cursor.description]
    return [dict(zip(names, _iso(row), strict=True)) for row in cursor.fetchall()]


def _iso(row: tuple[Any, ...]) -> Iterator[Any]:
    for value in row:
        yield value.isoformat(sep=" ", timespec="milliseconds") + "Z" if isinstance(value, datetime) else value
