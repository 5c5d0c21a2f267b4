"""`a2x-local search`: answer one query or a file of queries with any registered search method."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from a2x_local.cli.app import app
from a2x_local.cli.options import (
    DbOption,
    JsonOption,
    MethodChoice,
    open_registry_db,
    query_texts,
    settings_for,
    with_engine_options,
    with_method_options,
)
from a2x_local.cli.output import console, err_console, print_json, progress_bars, shown, want_progress
from a2x_local.llm import EngineOptions
from a2x_local.registry import Registry
from a2x_local.search import SearchAnswer, SearchCost, SearchRequest, make_method


def _answer_dict(answer: SearchAnswer, names: dict[str, str]) -> dict[str, Any]:
    return {
        "query": answer.query,
        "hits": [{"rank": rank, "id": hit.service_id, "name": names.get(hit.service_id), "score": hit.score,
                  "path": hit.path} for rank, hit in enumerate(answer.hits, start=1)],
        "ranked": answer.ranked, **answer.cost_values(SearchCost), "seconds": round(answer.seconds, 6),
        "error": answer.error,
        **({"trace": answer.trace} if answer.trace is not None else {}),
    }


@app.command("search")
@with_method_options
@with_engine_options
def search_command(
    ctx: typer.Context,
    query: Annotated[str | None, typer.Argument(help="What the agent needs, in words.", show_default=False)] = None,
    k: Annotated[int | None, typer.Option("--k", "-k", min=1, help="Results to return (ranked methods).")] = None,
    queries: Annotated[Path | None, typer.Option("--queries", "-q", help="Search every query of a file instead "
                                                 "(.txt one per line, or JSON/JSONL with a 'query' field).")] = None,
    trace: Annotated[bool, typer.Option("--trace", help="LLM methods: print the walk (decisions per node) and "
                                        "each selection call as a tree (--json always includes it).")] = False,
    db: DbOption = None,
    json_output: JsonOption = False,
    method: MethodChoice = None,  # type: ignore[assignment]  (filled by with_method_options)
    engine_options: EngineOptions = None,  # type: ignore[assignment]  (filled by with_engine_options)
) -> None:
    """Find the services that answer a request.

    Example: a2x-local search "book a flight to Paris" --method hybrid --k 5 --json
    """
    texts = query_texts(query, queries, "QUERY")
    settings = settings_for(ctx, db)
    options = method.with_engine(engine_options)
    with progress_bars(want_progress(json_output)) as bars:
        searcher = make_method(method.name, settings, settings.db_path, progress=bars, **options)
    answers = searcher.search_batch([SearchRequest(text_, k=k, mode=method.mode) for text_ in texts])
    with open_registry_db(settings, mode="read") as con:
        services = Registry(con).get_many(hit.service_id for answer in answers for hit in answer.hits)
    names = {service_id: service.name for service_id, service in services.items()}
    results = [_answer_dict(answer, names) for answer in answers]
    warnings = _warnings(answers)
    for warning in warnings:
        err_console.print(f"[yellow]warning:[/yellow] {shown(warning)}", highlight=False, soft_wrap=True)
    if json_output:
        print_json({"method": method.name, "options": options, "warnings": warnings, "results": results} if queries
                   else {"method": method.name, "options": options, "warnings": warnings, **results[0]})
        return
    for answer, result in zip(answers, results, strict=True):
        _print_answer(answer, result, services)
        if trace:
            from a2x_local.cli.trace_view import trace_tree

            console.print(trace_tree(answer))


def _warnings(answers: list[SearchAnswer]) -> list[str]:
    """What the user should know about every answer (a stale tree), said once rather than per query."""
    found = (answer.trace.get("stale", {}).get("warning") for answer in answers if answer.trace)
    return list(dict.fromkeys(warning for warning in found if warning))


# The description column only fits a wide terminal; below, ids and names come first.
DESCRIPTION_MIN_WIDTH = 100
ID_WIDTH, NAME_WIDTH, DESCRIPTION_WIDTH = 40, 32, 24   # the most an id and a name take; the least a description


def _split(room: int, id_wants: int, name_wants: int) -> tuple[int, int]:
    """Widths of the id and name columns in ``room`` characters: the name at least a third (cut with an
    ellipsis), the id what it wants of the rest (it folds onto more lines), then the name what is left."""
    name = min(name_wants, max(4, room // 3))
    ident = max(4, min(id_wants, room - name))
    return ident, max(1, min(name_wants, room - ident))


def answer_table(query: str, hits: list[dict[str, Any]], descriptions: dict[str, str], width: int) -> Table:
    """One answer's hits as a table ``width`` columns wide. Rank and score always keep their full width and the
    id folds onto more lines rather than vanish (rich alone squeezes such columns to nothing when descriptions are
    long); names are cut with an ellipsis; on a wide terminal the description takes what is left."""
    ranks = [str(hit["rank"]) for hit in hits]
    scores = ["" if hit["score"] is None else f"{hit['score']:.4f}" for hit in hits]
    ids = [shown(hit["id"]) for hit in hits]
    names = [shown(hit["name"] or "") for hit in hits]
    rank_width = max(len("#"), *map(len, ranks))
    score_width = max(len("score"), *map(len, scores))
    id_wants = min(ID_WIDTH, max(len("id"), *map(len, ids)))
    name_wants = min(NAME_WIDTH, max(len("name"), *map(len, names)))
    wide = width >= DESCRIPTION_MIN_WIDTH
    columns = 5 if wide else 4
    room = width - (columns + 1) - 2 * columns - rank_width - score_width   # borders, padding, the fixed columns
    ident, name = _split(room - DESCRIPTION_WIDTH if wide else room, id_wants, name_wants)
    table = Table(title=f"[bold]{shown(query)}[/bold]", title_justify="left")
    table.add_column("#", justify="right", no_wrap=True, width=rank_width)
    table.add_column("id", overflow="fold", width=ident)
    table.add_column("name", no_wrap=True, overflow="ellipsis", width=name)
    table.add_column("score", justify="right", no_wrap=True, width=score_width)
    if wide:
        table.add_column("description", no_wrap=True, overflow="ellipsis", width=room - ident - name)
    for hit, *cells in zip(hits, ranks, ids, names, scores, strict=True):
        # One line per hit: the description's line breaks and runs of spaces become single spaces.
        description = " ".join(descriptions.get(hit["id"], "").split())
        table.add_row(*cells, *([shown(description)] if wide else []))
    return table


def _print_answer(answer: SearchAnswer, result: dict[str, Any], services: dict[str, Any]) -> None:
    descriptions = {service_id: service.description for service_id, service in services.items()}
    table = answer_table(answer.query, result["hits"], descriptions, console.width)
    console.print(table)
    costs = f"{answer.seconds * 1000:.1f} ms"
    if answer.calls:
        costs += f", {answer.calls} model calls, {answer.prompt_tokens + answer.completion_tokens:,} tokens"
    console.print(f"[dim]{len(result['hits'])} results, {costs}[/dim]")
    if answer.error:
        console.print(f"[red]error:[/red] {shown(answer.error)}", highlight=False)
