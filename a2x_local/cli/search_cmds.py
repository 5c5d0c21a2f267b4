"""`a2x-local search`: answer one query or a file of queries with any registered search method."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text

from a2x_local.cli.options import (
    DbOption,
    JsonOption,
    MethodChoice,
    config_flag,
    open_registry_db,
    query_texts,
    settings_for,
    with_engine_options,
    with_method_options,
)
from a2x_local.cli.output import (
    console,
    err_console,
    in_chunks,
    print_json,
    progress_bars,
    progress_reporter,
    shown,
    want_progress,
)
from a2x_local.cli.tables import CUT, REST, Column, one_line, print_table
from a2x_local.evaluation import EvaluationConfig
from a2x_local.llm import EngineOptions
from a2x_local.registry import Registry
from a2x_local.search import SearchAnswer, SearchRequest, make_method
from a2x_local.settings import table_models

# This module's commands; the composition root (cli/app.py) adds them to the application.
commands = typer.Typer()

_RETRIEVAL = table_models()["retrieval"]   # --k takes default_k's bounds


def _answer_dict(answer: SearchAnswer, names: dict[str, str]) -> dict[str, Any]:
    return {
        "query": answer.query,
        "hits": [{"rank": rank, "service_id": hit.service_id, "name": names.get(hit.service_id), "score": hit.score,
                  "path": hit.path} for rank, hit in enumerate(answer.hits, start=1)],
        "ranked": answer.ranked, **asdict(answer.cost), "seconds": round(answer.seconds, 6),
        "error": answer.error,
        **({"trace": answer.trace} if answer.trace is not None else {}),
    }


def _mark_schemas(answers: list[SearchAnswer], results: list[dict[str, Any]], services: dict[str, Any]) -> None:
    """Each JSON hit says whether its service's parameters come as JSON Schema (`services show` gives it), so an
    agent can rule a candidate out without asking."""
    for answer, result in zip(answers, results, strict=True):
        for hit, shown_hit in zip(answer.hits, result["hits"], strict=True):
            service = services.get(hit.service_id)
            shown_hit["has_schema"] = service is not None and service.parameters_schema is not None


@commands.command("search")
@with_method_options
@with_engine_options
def search_command(
    ctx: typer.Context,
    query: Annotated[str | None, typer.Argument(help="What the agent needs, in words.", show_default=False)] = None,
    k: config_flag(_RETRIEVAL, "default_k", "--k", "-k", help="Results to return (ranked methods; default: "
                   "\\[retrieval] default_k).", show_default=False) = None,
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
    typed = method.typed(engine_options)
    requests = [SearchRequest(text_, k=k, mode=method.mode) for text_ in texts]
    # A file of queries is long work: piped or with --json it writes progress lines, as index and eval do.
    reporter = progress_reporter(json_output, "search") if queries else progress_bars(want_progress(json_output))
    with reporter as progress:
        searcher = make_method(method.name, settings, settings.db_path, progress=progress, options=typed)
        answers = in_chunks(searcher.search_batch, requests, progress if queries else None,
                            f"searching {len(requests):,} queries", EvaluationConfig.from_settings(settings).batch_size)
    with open_registry_db(settings, mode="read") as con:
        services = Registry(con).get_many(hit.service_id for answer in answers for hit in answer.hits)
    names = {service_id: service.name for service_id, service in services.items()}
    results = [_answer_dict(answer, names) for answer in answers]
    _mark_schemas(answers, results, services)
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

            console.print(trace_tree(answer), soft_wrap=False)  # soft-wrapped, a tree is cut: wrap it


def _warnings(answers: list[SearchAnswer]) -> list[str]:
    """What the user should know about every answer (a stale tree), said once rather than per query."""
    found = (answer.trace.get("stale", {}).get("warning") for answer in answers if answer.trace)
    return list(dict.fromkeys(warning for warning in found if warning))


# The most a name takes beside an id (it is cut with an ellipsis); a description takes what is left.
NAME_WIDTH = 32
HIT_COLUMNS = (Column("#", justify="right"), Column("id"), Column("name", CUT, most=NAME_WIDTH),
               Column("score", justify="right"), Column("description", REST))
NO_HITS = "no services found"


def print_hits(query: str, hits: list[dict[str, Any]], descriptions: dict[str, str]) -> None:
    """One answer's hits as a table at the terminal's width: rank, id and score whole, the name cut, the
    description on one line in what is left (see `tables`); "no services found" when there are none."""
    if not hits:
        console.print(Text(one_line(query), style="bold"), soft_wrap=True)
        console.print(NO_HITS)
        return
    rows = [(str(hit["rank"]), hit["service_id"], hit["name"] or "",
             "" if hit["score"] is None else f"{hit['score']:.4f}", descriptions.get(hit["service_id"], ""))
            for hit in hits]
    print_table(console, query, HIT_COLUMNS, rows)


def _print_answer(answer: SearchAnswer, result: dict[str, Any], services: dict[str, Any]) -> None:
    descriptions = {service_id: service.description for service_id, service in services.items()}
    print_hits(answer.query, result["hits"], descriptions)
    costs = f"{answer.seconds * 1000:.1f} ms"
    if answer.cost.calls:
        costs += f", {answer.cost.calls} model calls, {answer.cost.total_tokens:,} tokens"
    console.print(f"[dim]{len(result['hits'])} results, {costs}[/dim]")
    if answer.error:
        console.print(f"[red]error:[/red] {shown(answer.error)}", highlight=False)
