"""Temporary tables filled in bulk, for the writers of many rows at once (ingest, the tree, the answer cache, the
audit log)."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable

import duckdb

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
