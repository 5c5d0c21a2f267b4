"""Paths of the registry test data, and a snapshot of everything an ingest could change."""

from __future__ import annotations

from pathlib import Path

import duckdb

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample"




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
