"""Damage found before a command reads or writes through it: DuckDB opens a truncated or corrupted file without a
word and fails (or answers from what remains) only when a query reaches the bad block."""

from __future__ import annotations

from pathlib import Path

import duckdb

# DuckDB's main header and its two database headers (4 KiB each) come before the first block of the file.
HEADER_BYTES = 3 * 4096


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
