"""`a2x-local build`: the LLM taxonomy build (the nightly job)."""

from __future__ import annotations

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
from a2x_local.cli.output import console, err_console, print_json, with_round_progress
from a2x_local.llm import EngineOptions, Usage
from a2x_local.taxonomy import BuildConfig, run_build, summary_rows

# This module's commands; the composition root (cli/app.py) adds them to the application.
commands = typer.Typer()

_T = "Build thresholds (default: the \\[build] table of the config)"


@commands.command("build")
@with_engine_options
def build_command(
    ctx: typer.Context,
    resume: Annotated[bool, typer.Option("--resume", help="Continue the latest unfinished build from its last "
                                         "checkpoint (same model and settings).")] = False,
    leaf_size: config_flag(BuildConfig, "leaf_max_services", "--leaf-size", rich_help_panel=_T,
                           help="θ_leaf: split nodes with more services than this.") = None,
    max_depth: config_flag(BuildConfig, "max_depth", "--max-depth", rich_help_panel=_T,
                           help="D: deepest level that is split.") = None,
    max_children: config_flag(BuildConfig, "max_children", "--max-children", rich_help_panel=_T,
                              help="N: most sub-categories per node.") = None,
    keyword_threshold: config_flag(BuildConfig, "keyword_path_min_services", "--keyword-threshold",
                                   rich_help_panel=_T, help="θ_kw: nodes with more services design from keywords.")
    = None,
    refine_passes: config_flag(BuildConfig, "refine_passes", "--refine-passes", rich_help_panel=_T,
                               help="Assignment passes per node.") = None,
    cross_domain: Annotated[bool | None, typer.Option("--cross-domain/--no-cross-domain", rich_help_panel=_T,
                                                      help="Run the cross-domain pass.", show_default=False)]
    = None,
    keyword_merge: config_flag(BuildConfig, "keyword_merge", "--keyword-merge", rich_help_panel=_T,
                               help="Vocabulary merging.") = None,
    no_cache: NoCacheOption = False,
    db: DbOption = None,
    json_output: JsonOption = False,
    engine_options: EngineOptions = None,  # type: ignore[assignment]  (filled by with_engine_options)
) -> None:
    """Build the category tree of the registry with a local model; it becomes active when it completes.

    Each step of a level is one batch for the engine.

    Progress is saved after every round: a killed build continues with --resume.

    Example: a2x-local build --model qwen2.5-32b --json
    """
    settings = settings_for(ctx, db)
    config = BuildConfig.from_settings(settings, leaf_max_services=leaf_size, max_depth=max_depth,
                                       max_children=max_children, keyword_path_min_services=keyword_threshold,
                                       refine_passes=refine_passes, cross_domain=cross_domain,
                                       keyword_merge=keyword_merge)
    label = model_label(settings, engine_options)
    load = engine_loader(settings, engine_options, no_cache)
    outcome = with_round_progress(json_output, lambda observer: run_build(
        settings, load, model=label, config=config, resume=resume, observer=observer))
    if json_output:
        print_json({"build": outcome.build_id, "resumed": outcome.resumed, "active": outcome.active,
                    "notes": outcome.notes, "stats": outcome.report})
        return
    state = "now active" if outcome.active else "NOT activated (see the note)"
    table = Table(title=f"Tree {outcome.build_id} built{' (resumed)' if outcome.resumed else ''}; {state}")
    table.add_column("statistic")
    table.add_column("value", justify="right")
    for key, value in summary_rows(outcome.report):
        table.add_row(key, value)
    console.print(table)
    console.print(Usage.from_dict(outcome.report["usage"]).table(title="Model calls by call type"))
    for note in outcome.notes:
        err_console.print(f"[yellow]note:[/yellow] {note}")
