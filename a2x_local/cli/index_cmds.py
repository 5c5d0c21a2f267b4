"""`a2x-local index`: build the dense and BM25 indexes of the registry (searches also build them when stale)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from a2x_local.cli.app import app
from a2x_local.cli.common import (
    DbOption,
    JsonOption,
    console,
    err_console,
    open_registry_db,
    print_json,
    settings_for,
    want_progress,
)
from a2x_local.db import transaction
from a2x_local.registry import Registry
from a2x_local.search.config import retrieval_config
from a2x_local.search.corpus import (
    EMBEDDING_SETTING,
    ProgressFactory,
    embedding_model,
    ensure_bm25,
    ensure_dense,
    load_corpus,
)
from a2x_local.search.dense import BUILTIN_ALIASES, BUILTIN_MINILM, resolve_model
from a2x_local.search.index import index_root


@contextmanager
def progress_bars(enabled: bool) -> Iterator[ProgressFactory | None]:
    """A rich progress display on stderr handing out one bar per long step; None when output is for scripts."""
    if not enabled:
        yield None
        return
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err_console, transient=False) as progress:

        def bar(label: str, total: int) -> Callable[[int], None]:
            task = progress.add_task(label, total=total)
            return lambda n: progress.advance(task, n)

        yield bar


def _model_setting(spec: str) -> str | None:
    """What to store for ``--embedding-model``: the built-in name, an absolute path, or None for "default"."""
    if spec.strip().lower() == "default":
        return None
    path = resolve_model(spec)  # fails here, before anything is stored, when the model is not usable
    if spec.strip().lower() in BUILTIN_ALIASES:
        return BUILTIN_MINILM
    return str(path)


@app.command("index")
def index_command(
    ctx: typer.Context,
    embedding_model_spec: Annotated[str | None, typer.Option(
        "--embedding-model", help="Store this registry's embedding model first: 'all-MiniLM-L6-v2' (built in), "
        "a sentence-transformers folder, or 'default' to follow the configuration.")] = None,
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
    here or on the next search.

    Example: a2x-local index --embedding-model /models/multilingual-e5-small --json
    """
    if only not in (None, "dense", "bm25"):
        raise typer.BadParameter("use 'dense' or 'bm25'", param_hint="--only")
    settings = settings_for(ctx, db)
    config = retrieval_config(settings, text=text, text_params=params)
    if embedding_model_spec is not None:
        value = _model_setting(embedding_model_spec)
        with open_registry_db(settings) as con, transaction(con):
            Registry(con).set_setting(EMBEDDING_SETTING, value)
    corpus = load_corpus(settings.db_path, lock_timeout_s=settings.lock_timeout_s)
    infos = []
    with progress_bars(want_progress(json_output)) as bars:
        if only in (None, "dense"):
            infos.append(ensure_dense(corpus, config, force=force, progress=bars)[2])
        if only in (None, "bm25"):
            infos.append(ensure_bm25(corpus, config, force=force)[1])
    result = {"db": str(settings.db_path), "services": len(corpus.services), "folder": str(index_root(corpus.db_path)),
              "embedding_model": embedding_model(corpus, config), "text": config.text_options().key(),
              "indexes": [info.to_dict() for info in infos]}
    if json_output:
        print_json(result)
        return
    table = Table(title=f"Indexes of {settings.db_path} ({len(corpus.services):,} services)")
    for column in ("index", "state", "seconds", "folder"):
        table.add_column(column, justify="right" if column == "seconds" else "left")
    for info in infos:
        table.add_row(info.kind, "built" if info.built else "current", f"{info.seconds:.2f}",
                      str(Path(info.path).name))
    console.print(table)
    console.print(f"embedding model: {result['embedding_model']}; text: {result['text']}", highlight=False)
