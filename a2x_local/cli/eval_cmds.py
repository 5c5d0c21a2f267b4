"""`a2x-local eval`: score a search method on a benchmark query file; `eval compare` puts runs side by side."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from a2x_local.cli.options import (
    DbOption,
    JsonOption,
    MethodChoice,
    config_flag,
    settings_for,
    with_engine_options,
    with_method_options,
)
from a2x_local.cli.output import console, print_json, progress_reporter
from a2x_local.errors import UserError
from a2x_local.evaluation import (
    COMPARE_COLUMNS,
    PRESETS,
    EvaluationConfig,
    check_plots,
    comparability,
    compare_presets,
    compare_row,
    compare_runs,
    decision_notes,
    describe_method,
    load_queries,
    pct,
    plan_run,
    registry_info,
    run_evaluation,
)
from a2x_local.jsonfiles import JsonLimits
from a2x_local.llm import EngineOptions, make_engine
from a2x_local.search import MODES, LabelledQuery, clear_fusion, make_method, tune_fusion

# This module's commands; the composition root (cli/app.py) adds them to the application.
commands = typer.Typer()

eval_app = typer.Typer(
    invoke_without_command=True, no_args_is_help=False,
    help="Score a search method on a query file (writes results.jsonl, summary.json, report.md and a plot into a "
    "run folder; rerunning resumes it); `eval compare RUN_DIR...` puts runs side by side; `eval tune` chooses a "
    "registry's hybrid fusion weights.\n\n"
    "Example: a2x-local eval --queries data/toolret/queries_dev.json --method hybrid --k 10")
commands.add_typer(eval_app, name="eval")

COMPACT_COLUMNS = ("run", "k", "hit", "recall", "hit@10", "hit@50", "MRR", "tokens/q", "p50 ms")


def _usage(message: str, hint: str) -> typer.BadParameter:
    return typer.BadParameter(message, param_hint=hint)


PlotsOption = Annotated[bool, typer.Option("--plots/--no-plots", help="Draw PNG plots (needs the \\[plots] extra).")]


@eval_app.callback()
@with_method_options
@with_engine_options
def eval_command(
    ctx: typer.Context,
    queries: Annotated[Path | None, typer.Option("--queries", "-q", help="Benchmark file: JSON list (or JSONL) "
                                                 "of {id, query, correct_tools: [{id}]}.")] = None,
    k: Annotated[int, typer.Option("--k", "-k", min=1, max=100_000, help="Answer size of ranked methods.")] = 10,
    limit: Annotated[int | None, typer.Option(min=1, max=10_000_000, help="Only the first N queries.")] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Run folder (default: runs/<queries>-<method>-<hash>;"
                                             " the same settings resume the same folder).")] = None,
    fresh: Annotated[bool, typer.Option("--fresh", help="Discard what the run folder holds and start over.")] = False,
    batch_size: config_flag(EvaluationConfig, "batch_size", "--batch-size", help="Queries per search_batch call "
                            "(default: \\[evaluation] batch_size).", show_default=False) = None,
    missing: Annotated[str | None, typer.Option("--missing-tools", help="Correct services absent from the "
                                                "registry: exclude (default) | strict (count as misses).")] = None,
    plots: PlotsOption = True,
    db: DbOption = None,
    json_output: JsonOption = False,
    method: MethodChoice = None,  # type: ignore[assignment]  (filled by with_method_options)
    engine_options: EngineOptions = None,  # type: ignore[assignment]  (filled by with_engine_options)
) -> None:
    """Run a method over a query file; writes results.jsonl, summary.json, report.md and a plot.

    Example: a2x-local eval --queries data/toolret/queries_dev.json --method hybrid --k 10
    """
    if ctx.invoked_subcommand is not None:
        return
    if queries is None:
        raise _usage("--queries FILE is required (or use `a2x-local eval compare RUN...`)", "--queries")
    if plots:
        check_plots()
    settings = settings_for(ctx, db)
    config = EvaluationConfig.from_settings(settings, batch_size=batch_size, missing_tools=missing)
    query_list = load_queries(queries, JsonLimits.from_settings(settings))
    registry = registry_info(settings.db_path, lock_timeout_s=settings.lock_timeout_s)
    options = method.with_engine(engine_options)
    typed = method.typed(engine_options)
    with progress_reporter(json_output, "eval") as bars:
        searcher = make_method(method.name, settings, settings.db_path, progress=bars, options=typed)
        plan = plan_run(method=method.name, options=options, mode=method.mode, k=k, queries_file=queries,
                        registry=registry, config=config, out=out, method_info=describe_method(searcher, method.name))
        total = min(limit, len(query_list)) if limit else len(query_list)
        advance = bars(f"{method.name} on {Path(queries).name}", total) if bars else None
        summary = run_evaluation(searcher, query_list, plan, registry, config, limit=limit, fresh=fresh,
                                 progress=advance, plots=plots)
    _require_scores(summary)
    if json_output:
        print_json(summary)
        return
    _print_summary(summary)


def _require_scores(summary: dict[str, Any]) -> None:
    """An evaluation that scored nothing measured nothing: exit 1, not a table of zeros."""
    queries = summary["queries"]
    skipped = len(queries["skipped_no_correct_in_registry"])
    if not queries["scored"]:
        raise UserError(f"no query was scored: {skipped:,} of {queries['selected']:,} have no correct service in the"
                        f" registry (run folder {summary['run_dir']})", code="NothingScored",
                        hint="ingest the services the benchmark names (its services file), or evaluate against"
                        " the registry it was written for")
    if queries["answered"] and queries["errors"] == queries["answered"]:
        raise UserError(f"every one of the {queries['answered']:,} queries ended in an error (run folder"
                        f" {summary['run_dir']}); report.md lists them", code="AllFailed",
                        hint="fix the cause (the model server, the engine), then rerun: the run resumes and retries"
                        " them")


def _print_summary(summary: dict[str, Any]) -> None:
    queries = summary["queries"]
    console.print(f"[bold]{summary['label']}[/bold]: {queries['scored']} queries scored "
                  f"({summary['resumed_queries']} from an earlier run) in {summary['run_dir']}", highlight=False)
    row = compare_row(summary)
    table = Table(show_header=False)  # one metric per line: readable on any terminal width
    table.add_column("metric")
    table.add_column("value", justify="right")
    for column in COMPARE_COLUMNS[2:]:
        if row[column] != "-":
            table.add_row(column, row[column])
    console.print(table)
    ranked = summary.get("ranked")
    if ranked:
        cuts = [f"@{label}={pct(cut['hit'])}/{pct(cut['recall'])}" for label, cut in ranked["at"].items()]
        console.print("hit/recall " + "  ".join(cuts), highlight=False)
    if queries["skipped_no_correct_in_registry"] or queries["with_missing_tools"]:
        console.print(f"[yellow]{len(queries['skipped_no_correct_in_registry'])} queries have no correct service "
                      f"in the registry (not scored); {queries['with_missing_tools']} name services missing from "
                      "it[/yellow] (see report.md)")
    if queries["errors"]:
        console.print(f"[red]{queries['errors']} queries ended in an error[/red]; rerun to retry them")
    for note in decision_notes(summary):
        console.print(note, highlight=False, markup=False)


@eval_app.command("compare")
def compare_command(
    run_dirs: Annotated[list[Path], typer.Argument(help="Run folders written by `a2x-local eval`.",
                                                   metavar="RUN_DIR...", show_default=False)],
    out: Annotated[Path | None, typer.Option("--out", help="Also write compare.md and the plots here.")] = None,
    plots: PlotsOption = True,
    json_output: JsonOption = False,
) -> None:
    """Put finished runs side by side; with --out, also hit/recall versus k and tokens versus hit plots.

    Example: a2x-local eval compare runs/queries_dev-dense-* runs/queries_dev-hybrid-* --out runs/compare
    """
    if out is not None and plots:
        check_plots()
    summaries, files = compare_runs(run_dirs, out, plots=plots)
    rows = [compare_row(summary) for summary in summaries]
    notes = comparability(summaries)
    if json_output:
        print_json({"runs": rows, "comparable": not notes, "warnings": notes, "files": [str(f) for f in files]})
        return
    # All columns when they fit; a narrow terminal gets the essentials (--json and compare.md have them all).
    columns = COMPARE_COLUMNS if console.width >= 170 else COMPACT_COLUMNS
    table = Table(title="runs")
    for column in columns:
        table.add_column(column, justify="left" if column == "run" else "right", overflow="fold")
    for row in rows:
        table.add_row(*(row[c] for c in columns))
    console.print(table)
    for note in notes:
        # Prose: wrapped at a terminal's width, one line in a pipe (the console's own choice).
        console.print(f"[yellow]warning: not comparable:[/yellow] {note}", highlight=False)
    for file in files:
        console.print(f"wrote {file}", highlight=False)


@eval_app.command("compare-presets")
@with_engine_options
def compare_presets_command(
    ctx: typer.Context,
    queries: Annotated[Path, typer.Option("--queries", "-q", help="Benchmark file: JSON list (or JSONL) of {id, "
                                          "query, correct_tools: [{id}]}.", show_default=False)],
    presets: Annotated[str, typer.Option("--presets", help="Comma-separated \\[search] presets to compare.")]
    = ",".join(PRESETS),
    mode: Annotated[str | None, typer.Option("--mode", help="get_all | get_important | get_one (default: "
                                             "\\[search] default_mode).", show_default=False)] = None,
    limit: Annotated[int | None, typer.Option(min=1, max=10_000_000, help="Only the first N queries.")] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Folder of the runs, one per preset (default: "
                                             "<runs_dir>/presets-<queries>).", show_default=False)] = None,
    batch_size: config_flag(EvaluationConfig, "batch_size", "--batch-size", help="Queries per search_batch call "
                            "(default: \\[evaluation] batch_size).", show_default=False) = None,
    db: DbOption = None,
    json_output: JsonOption = False,
    engine_options: EngineOptions = None,  # type: ignore[assignment]  (filled by with_engine_options)
) -> None:
    """Run a2x under several presets (published, default, lean) on the same queries with one model: hit, recall,
    prompt tokens and computed tokens side by side, with how the model chose (the share of its choices that took the
    first option, against a choice blind to position) and what held it in check (over-selections, budget cuts,
    answers cut off).

    Computed tokens are what the engine computed: the prompt tokens its prefix cache did not serve (as the engine
    reports them), plus decode. Each preset starts from a cold cache where the engine allows it (vLLM). Every run is
    an ordinary run folder (`eval compare` reads them).

    Example: a2x-local eval compare-presets --model qwen2.5-7b --queries data/toolret/queries_dev.json --limit 200
    """
    names = [name.strip() for name in presets.split(",") if name.strip()]
    settings = settings_for(ctx, db)
    known = list(settings.config.get("search_presets", {}))
    unknown = [name for name in names if name not in known]
    if unknown or not names:
        raise _usage(f"unknown preset(s) {', '.join(unknown) or '(none given)'}; choose from: {', '.join(known)}",
                     "--presets")
    if mode is not None and mode not in MODES:
        raise _usage(f"unknown mode '{mode}'; choose {', '.join(MODES)}", "--mode")
    config = EvaluationConfig.from_settings(settings, batch_size=batch_size)
    query_list = load_queries(queries, JsonLimits.from_settings(settings))
    registry = registry_info(settings.db_path, lock_timeout_s=settings.lock_timeout_s)
    folder = out or Path(config.runs_dir) / f"presets-{Path(queries).stem}"
    engine = make_engine(settings, engine_options)
    try:
        with progress_reporter(json_output, "eval") as bars:
            report = compare_presets(settings, engine, query_list, queries_file=queries, registry=registry,
                                     config=config, out=folder, presets=names, mode=mode, limit=limit,
                                     progress=bars)
    finally:
        engine.close()
    if json_output:
        print_json(report)
        return
    table = Table(title=f"a2x by preset: {Path(queries).name}, {report['engine'].get('model', '')}")
    for column in ("preset", "hit", "recall", "prompt tok/q", "computed tok/q", "calls/q", "1st option %",
                   "errors"):
        table.add_column(column, justify="left" if column == "preset" else "right", no_wrap=column == "preset")
    for row in report["presets"]:
        first = "-" if row["first_option_share"] is None else (
            f"{pct(row['first_option_share'])} / {pct(row['uniform_share'])}" + ("!" if row["by_position"] else ""))
        table.add_row(row["preset"], pct(row["hit"]), pct(row["recall"]), f"{row['prompt_tokens_per_query']:,.0f}",
                      f"{row['computed_tokens_per_query']:,.0f}", f"{row['calls_per_query']:.2f}", first,
                      str(row["errors"]))
    console.print(table)
    console.print("[dim]1st option %: the share of the model's choices that took the first option shown / the share a"
                  " choice blind to position would give[/dim]")
    positional = [row["preset"] for row in report["presets"] if row["by_position"]]
    if positional:
        console.print(f"[yellow]the model chooses by position, not by meaning, under {', '.join(positional)} (marked"
                      " !): it takes the first option far more often than a blind choice would (docs/evaluation.md,"
                      " Position bias)[/yellow]")
    for row in report["presets"]:
        guards = [f"{row[key]} {what}" for key, what in (("overselected_answers", "answers chose too many options"),
                                                         ("budget_cut_requests", "requests cut by the budget"),
                                                         ("truncated_answers", "answers cut off")) if row[key]]
        if guards:
            console.print(f"[yellow]{row['preset']}: {'; '.join(guards)}[/yellow]", highlight=False)
    if not all(row["cold_cache"] for row in report["presets"]):
        console.print("[dim]the engine could not drop its prefix cache between presets: later presets may find "
                      "shared instructions cached already[/dim]")
    console.print(f"runs in {folder}", highlight=False)


@eval_app.command("tune")
def tune_command(
    ctx: typer.Context,
    queries: Annotated[Path | None, typer.Option("--queries", "-q", help="Labelled queries of this registry (the "
                                                 "`eval` format); half tunes, half is held out.")] = None,
    k: Annotated[int, typer.Option("--k", "-k", min=1, max=100_000,
                                   help="Cut-off of the hit@k that is maximised.")] = 10,
    held_out: Annotated[float, typer.Option("--held-out", min=0.05, max=0.95,
                                            help="Share of the queries held out to report on.")] = 0.5,
    embedding_model: Annotated[str | None, typer.Option(
        "--embedding-model", help="Tune for this embedding model instead of the registry's.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Report only; store nothing.")] = False,
    clear: Annotated[bool, typer.Option("--clear", help="Remove the registry's tuned weights and stop.")] = False,
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Choose the hybrid fusion weights of this registry on labelled queries and store them in the registry.

    The weights are chosen on one part of the queries (hit@k, dense weight from 0 to 1, several RRF constants) and
    reported on the held-out part beside the configured weights and each method alone. Hybrid searches of this
    registry then use them while its embedding model stays the one they were tuned with.

    Example: a2x-local eval tune --queries data/toolret_zh/queries_dev.json
    """
    settings = settings_for(ctx, db)
    if clear:
        removed = clear_fusion(settings)
        if json_output:
            print_json({"db": str(settings.db_path), "cleared": removed})
        else:
            console.print("tuned fusion weights removed" if removed else "no tuned fusion weights to remove")
        return
    if queries is None:
        raise _usage("--queries FILE is required", "--queries")
    labelled = [LabelledQuery(q.id, q.query, frozenset(q.correct)) for q in load_queries(queries)]
    with progress_reporter(json_output, "eval") as bars:
        report = tune_fusion(settings, labelled, k=k, held_out_share=held_out, store=not dry_run,
                             embedding_model=embedding_model, queries_name=Path(queries).name, progress=bars)
    if json_output:
        print_json(report.to_dict())
        return
    counts = report.queries
    metric = report.metric
    table = Table(title=f"fusion weights by {metric}: {counts['tune']} tuning, {counts['held_out']} held-out queries")
    columns = {"dense": "dense_weight", "bm25": "bm25_weight", "rrf_k": "rrf_k", f"tune {metric}": f"tune_{metric}",
               f"held-out {metric}": f"held_out_{metric}", "held-out recall": f"held_out_recall@{metric.split('@')[1]}"}
    table.add_column("weights")
    for title in columns:
        table.add_column(title, justify="right")
    for row in report.rows:
        table.add_row(row["label"], *(f"{row[key]:g}" for key in columns.values()))
    console.print(table)
    chosen = ", ".join(f"{key} = {value:g}" for key, value in report.chosen.items())
    action = "stored in the registry" if report.stored else "not stored (--dry-run)"
    console.print(f"chosen: {chosen}; {action}", highlight=False)
