"""`a2x-local index`: build the dense and BM25 indexes of the registry (searches also build them when stale)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from a2x_local.cli.options import DbOption, JsonOption, settings_for
from a2x_local.cli.output import console, print_json, progress_reporter
from a2x_local.search import build_indexes

# This module's commands; the composition root (cli/app.py) adds them to the application.
commands = typer.Typer()


@commands.command("index")
def index_command(
    ctx: typer.Context,
    embedding_model_spec: Annotated[str | None, typer.Option(
        "--embedding-model", help="Store this registry's embedding model first: an alias ('all-MiniLM-L6-v2', "
        "'multilingual-e5-small', or one of \\[retrieval.embedding_models]), a sentence-transformers folder, or "
        "'auto' to follow the configuration (by default: chosen by the registry's script).")] = None,
    text: Annotated[str | None, typer.Option(help="Indexed text: name_description | description.")] = None,
    params: Annotated[bool | None, typer.Option("--params/--no-params",
                                                help="Add parameter names from metadata.inputSchema.")] = None,
    only: Annotated[str | None, typer.Option(help="Build only 'dense' or 'bm25'.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Rebuild even when the indexes are current.")] = False,
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Build the retrieval indexes (dense + BM25) beside the registry database.

    Indexes are tied to the registry content, the embedding model and the text options; a stale one is rebuilt
    here or on the next search. With no model set, a registry mostly in non-Latin script (Chinese, Japanese,
    Korean, Cyrillic, ...) gets the multilingual model; the choice is recorded in the registry and said in one line.

    Example: a2x-local index --embedding-model multilingual-e5-small --json
    """
    if only not in (None, "dense", "bm25"):
        raise typer.BadParameter("use 'dense' or 'bm25'", param_hint="--only")
    settings = settings_for(ctx, db)
    with progress_reporter(json_output, "index") as bars:
        report = build_indexes(settings, embedding_model_spec=embedding_model_spec, text=text, params=params,
                               only=only, force=force, progress=bars)
    if json_output:
        print_json(report.to_dict())
        return
    table = Table(title=f"Indexes of {report.db} ({report.services:,} services)")
    for column in ("index", "state", "seconds", "folder"):
        table.add_column(column, justify="right" if column == "seconds" else "left")
    for info in report.indexes:
        table.add_row(info.kind, "built" if info.built else "current", f"{info.seconds:.2f}",
                      str(Path(info.path).name))
    console.print(table)
    console.print(report.notice, highlight=False)   # prose: wrapped in a terminal, one line in a pipe
    console.print(f"indexed text: {report.text}", highlight=False)
