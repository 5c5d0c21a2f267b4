"""The file's schema: forward-only migrations (the SQL of `a2x_local/migrations`, read with importlib.resources) and
the history of the installs that created or upgraded the file."""

from __future__ import annotations

import re
from importlib import resources

import duckdb

from a2x_local import provenance
from a2x_local.db.transactions import transaction
from a2x_local.errors import UserError

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
