"""Options, output helpers and database access shared by every command."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import duckdb
import typer
from rich.console import Console

from a2x_local.db import connect
from a2x_local.settings import Settings, load_settings

console = Console()
err_console = Console(stderr=True)

DbOption = Annotated[
    Path | None,
    typer.Option("--db", help="Registry database file (default: $A2X_DB, else $A2X_HOME/registry.duckdb).",
                 show_default=False),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON instead of tables.")]


def settings_for(ctx: typer.Context | None, db: Path | None = None) -> Settings:
    """Settings with the command's `--db`, else the global `--db`, else environment and config files."""
    global_db = None
    if ctx is not None:
        root = ctx.find_root()
        global_db = (root.obj or {}).get("db") if isinstance(root.obj, dict) else None
    return load_settings(db=db or global_db)


@contextmanager
def open_registry_db(settings: Settings) -> Iterator[duckdb.DuckDBPyConnection]:
    """The registry database, opened (and migrated) for the length of a block."""
    with connect(settings.db_path, lock_timeout_s=settings.lock_timeout_s) as con:
        yield con


def print_json(data: Any) -> None:
    """JSON on stdout, unwrapped, for scripts."""
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()


def want_progress(json_output: bool) -> bool:
    """Progress bars only for people: not in --json mode and not when stderr is not a terminal."""
    return not json_output and err_console.is_terminal
