"""A snapshot of everything an ingest could change."""

from __future__ import annotations

from pathlib import Path

import duckdb


def snapshot(db_path: Path) -> tuple:
    """Everything an ingest could change: all service rows and all ingest runs."""
    if not db_path.exists():
        return ()
    con = duckdb.connect(str(db_path), read_only=True)
    try:
        services = con.execute("SELECT * FROM services ORDER BY id").fetchall()
        runs = con.execute("SELECT * FROM ingest_runs ORDER BY id").fetchall()
    finally:
        con.close()
    return services, runs
