"""`a2x-local search`: answer one query or a file of queries with any registered search method."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from a2x_local.cli.app import app
from a2x_local.cli.common import (
    DbOption,
    JsonOption,
    console,
    open_registry_db,
    print_json,
    settings_for,
    want_progress,
)
from a2x_local.cli.engine_options import (
    BaseUrlOption,
    DtypeOption,
    EngineOption,
    GpuMemoryOption,
    MaxModelLenOption,
    QuantizationOption,
    StructuredBackendOption,
    TensorParallelOption,
)
from a2x_local.cli.index_cmds import progress_bars
from a2x_local.evaluation.queries import load_query_texts
from a2x_local.registry import Registry
from a2x_local.search.llm_config import ENGINE_KEYS
from a2x_local.search.methods import make_method, method_names, method_spec, parse_option_pairs
from a2x_local.search.types import SearchAnswer, SearchRequest, check_queries

MethodOption = Annotated[str, typer.Option("--method", "-m", help=f"Search method: {' | '.join(method_names())}.")]
ModeOption = Annotated[str | None, typer.Option("--mode", help="Selection mode of LLM methods "
                                                "(get_all | get_important | get_one).")]
ModelOption = Annotated[str | None, typer.Option("--model", help="LLM of LLM methods: alias or path.")]
EmbeddingOption = Annotated[str | None, typer.Option("--embedding-model", help="Embedding model of dense and "
                                                     "hybrid (default: the registry's setting).")]
TextOption = Annotated[str | None, typer.Option("--text", help="Indexed text: name_description | description.")]
OptionPairs = Annotated[list[str] | None, typer.Option("--option", "-o", help="Any other method option, "
                                                       "KEY=VALUE (repeatable), e.g. -o rrf_k=30.")]


# Flags of `search` and `eval` that are method options of the same name (absent ones are left out).
METHOD_FLAGS = ("model", "embedding_model", "text", "engine", *(key for key in ENGINE_KEYS if key != "model"))


def method_options(ctx: typer.Context, pairs: list[str] | None) -> dict[str, Any]:
    """The method options a command was given: its `-o KEY=VALUE` pairs, then the flags named in METHOD_FLAGS."""
    options: dict[str, Any] = parse_option_pairs(pairs or [])
    for key in METHOD_FLAGS:
        if ctx.params.get(key) is not None:
            options[key] = ctx.params[key]
    return options


def check_mode(method: str, mode: str | None) -> None:
    spec = method_spec(method)
    if mode is not None and mode not in spec.modes:
        accepted = ", ".join(spec.modes) if spec.modes else "none (it has no modes)"
        raise typer.BadParameter(f"method '{method}' accepts: {accepted}", param_hint="--mode")


def _answer_dict(answer: SearchAnswer, names: dict[str, str]) -> dict[str, Any]:
    return {
        "query": answer.query,
        "hits": [{"rank": rank, "id": hit.service_id, "name": names.get(hit.service_id), "score": hit.score,
                  "path": hit.path} for rank, hit in enumerate(answer.hits, start=1)],
        "ranked": answer.ranked, "prompt_tokens": answer.prompt_tokens,
        "completion_tokens": answer.completion_tokens, "calls": answer.calls, "rounds": answer.rounds,
        "candidates_shown": answer.candidates_shown, "seconds": round(answer.seconds, 6), "error": answer.error,
        **({"trace": answer.trace} if answer.trace is not None else {}),
    }


@app.command("search")
def search_command(
    ctx: typer.Context,
    query: Annotated[str | None, typer.Argument(help="What the agent needs, in words.", show_default=False)] = None,
    method: MethodOption = "hybrid",
    k: Annotated[int | None, typer.Option("--k", "-k", min=1, help="Results to return (ranked methods).")] = None,
    queries: Annotated[Path | None, typer.Option("--queries", help="Search every query of a file instead "
                                                 "(.txt one per line, or JSON/JSONL with a 'query' field).")] = None,
    mode: ModeOption = None,
    model: ModelOption = None,
    embedding_model: EmbeddingOption = None,
    text: TextOption = None,
    option: OptionPairs = None,
    engine: EngineOption = None,
    base_url: BaseUrlOption = None,
    max_model_len: MaxModelLenOption = None,
    dtype: DtypeOption = None,
    gpu_memory_utilization: GpuMemoryOption = None,
    tensor_parallel_size: TensorParallelOption = None,
    quantization: QuantizationOption = None,
    structured_backend: StructuredBackendOption = None,
    trace: Annotated[bool, typer.Option("--trace", help="LLM methods: print the walk (decisions per node) and "
                                        "each selection call as a tree (--json always includes it).")] = False,
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Find the services that answer a request.

    Example: a2x-local search "book a flight to Paris" --method hybrid --k 5 --json
    """
    if (query is None) == (queries is None):
        raise typer.BadParameter("give either a QUERY or --queries FILE (not both)", param_hint="QUERY")
    check_mode(method, mode)
    if query is not None:
        check_queries([query])
    texts = [query.strip()] if query is not None else load_query_texts(queries)
    settings = settings_for(ctx, db)
    options = method_options(ctx, option)  # --model, --engine, ... (METHOD_FLAGS) are read from ctx.params
    with progress_bars(want_progress(json_output)) as bars:
        searcher = make_method(method, settings, settings.db_path, progress=bars, **options)
    answers = searcher.search_batch([SearchRequest(text_, k=k, mode=mode) for text_ in texts])
    with open_registry_db(settings) as con:
        services = Registry(con).get_many(hit.service_id for answer in answers for hit in answer.hits)
    names = {service_id: service.name for service_id, service in services.items()}
    results = [_answer_dict(answer, names) for answer in answers]
    if json_output:
        print_json({"method": method, "options": options, "results": results} if queries else
                   {"method": method, "options": options, **results[0]})
        return
    for answer, result in zip(answers, results, strict=True):
        _print_answer(answer, result, services)
        if trace:
            from a2x_local.search.trace_view import trace_tree

            console.print(trace_tree(answer))


def _print_answer(answer: SearchAnswer, result: dict[str, Any], services: dict[str, Any]) -> None:
    table = Table(title=f"[bold]{answer.query}[/bold]", title_justify="left")
    wide = console.width >= 100  # the description only fits on a wide terminal; ids and names come first
    table.add_column("#", justify="right", no_wrap=True, min_width=2)
    table.add_column("id", overflow="fold", max_width=40)
    table.add_column("name", no_wrap=True, overflow="ellipsis", max_width=32)
    table.add_column("score", justify="right", no_wrap=True, min_width=6)
    if wide:
        table.add_column("description", ratio=1, no_wrap=True, overflow="ellipsis")
    for hit in result["hits"]:
        service = services.get(hit["id"])
        score = "" if hit["score"] is None else f"{hit['score']:.4f}"
        cells = [str(hit["rank"]), hit["id"], hit["name"] or "", score]
        table.add_row(*cells, *([service.description if service else ""] if wide else []))
    console.print(table)
    costs = f"{answer.seconds * 1000:.1f} ms"
    if answer.calls:
        costs += f", {answer.calls} model calls, {answer.prompt_tokens + answer.completion_tokens:,} tokens"
    console.print(f"[dim]{len(result['hits'])} results, {costs}[/dim]")
    if answer.error:
        console.print(f"[red]error:[/red] {answer.error}", highlight=False)
