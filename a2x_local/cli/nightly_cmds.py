"""`a2x-local nightly`: the job between builds (sync, build or update, gate, switch, retain, report)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from a2x_local.cli.options import (
    DbOption,
    JsonOption,
    NoCacheOption,
    config_flag,
    engine_loader,
    model_label,
    settings_for,
    with_engine_options,
)
from a2x_local.cli.output import console, print_error, print_json, shown, with_round_progress
from a2x_local.lifecycle import EXIT_CODES, NightlyRequest, run_nightly, summary_rows
from a2x_local.llm import EngineOptions
from a2x_local.settings import table_models

# This module's commands; the composition root (cli/app.py) adds them to the application.
commands = typer.Typer()

_LIFECYCLE = table_models()["lifecycle"]   # the flags below take its fields' bounds
_EXIT_HELP = "; ".join(f"{code} {meaning}" for code, meaning in sorted(EXIT_CODES.items()))


@commands.command("nightly", help=f"""Sync the registry from an export, then build or update the tree when anything
changed, check it against the active tree on a query file, switch, and keep the newest trees.

One job per database at a time; a JSON report is written for every run. Exit codes: {_EXIT_HELP}.

Example: a2x-local nightly --source /srv/exports/services.json --model qwen2.5-7b -q queries.json --max-drop 2""")
@with_engine_options
def nightly_command(
    ctx: typer.Context,
    source: Annotated[list[Path], typer.Option("--source", help="The export: files or folders the registry must "
                                               "equal (repeatable).", show_default=False)],
    fmt: Annotated[str, typer.Option("--format", "-f", help="Input format of the export (see `ingest --help`).")]
    = "auto",
    queries: Annotated[Path | None, typer.Option("--queries", "-q", help="Gate: benchmark file both trees answer; "
                                                 "without it the new tree is activated directly.")] = None,
    max_drop: config_flag(_LIFECYCLE, "max_drop", "--max-drop", help="Gate: most hit-rate points the new tree may "
                          "lose (default: \\[lifecycle] max_drop).") = None,
    keep: config_flag(_LIFECYCLE, "keep_trees", "--keep", help="Completed trees to keep, newest first; the active "
                      "tree is never deleted (default: \\[lifecycle] keep_trees).") = None,
    force: Annotated[bool, typer.Option("--force", help="Sync even when it removes more than \\[registry] "
                                        "sync_max_remove_share of the services.")] = False,
    rebuild: Annotated[bool, typer.Option("--rebuild", help="Build afresh instead of updating the active tree "
                                          "(unchanged prompts are still answered from the cache).")] = False,
    report: Annotated[Path | None, typer.Option("--report", help="Write the JSON report here (default: "
                                                "$A2X_HOME/nightly/nightly-DATE-TIME.json).")] = None,
    no_cache: NoCacheOption = False,
    db: DbOption = None,
    json_output: JsonOption = False,
    engine_options: EngineOptions = None,  # type: ignore[assignment]  (filled by with_engine_options)
) -> None:
    settings = settings_for(ctx, db)
    request = NightlyRequest(source=list(source), model=model_label(settings, engine_options), fmt=fmt,
                             queries=queries, max_drop=max_drop, keep=keep, force=force, rebuild=rebuild,
                             report=report)
    load = engine_loader(settings, engine_options, no_cache)
    outcome = with_round_progress(json_output, lambda observer: run_nightly(settings, request, load, observer=observer),
                                  command="nightly")
    data = outcome.report
    if json_output:
        print_json(data | {"report_file": str(outcome.path)})
    else:
        table = Table(title=f"Nightly job on {settings.db_path}")
        table.add_column("step")
        table.add_column("result", overflow="fold")
        for label, value in summary_rows(data):
            table.add_row(label, shown(value))
        console.print(table, highlight=False)
        console.print(f"report: {outcome.path}", highlight=False, soft_wrap=True)
    if outcome.error is not None:
        print_error(outcome.error)
    if outcome.exit_code:
        raise typer.Exit(outcome.exit_code)
