"""Between builds: `tree update` (incremental placement), `tree diff A B`, and `a2x-local nightly`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from a2x_local.cli.app import app
from a2x_local.cli.common import (
    DbOption,
    JsonOption,
    NoCacheOption,
    console,
    engine_loader,
    err_console,
    model_label,
    open_registry_db,
    print_error,
    print_json,
    settings_for,
    shown,
    with_engine_options,
    with_round_progress,
)
from a2x_local.cli.tree_cmds import tree_app
from a2x_local.lifecycle import EXIT_CODES, PLACEMENTS, NightlyRequest, run_nightly, run_update, summary_rows
from a2x_local.llm import EngineOptions
from a2x_local.taxonomy import diff_trees, load_tree

_SHOWN = 20


@tree_app.command("update")
@with_engine_options
def update_command(
    ctx: typer.Context,
    base: Annotated[int | None, typer.Option("--id", help="Tree to start from; default: the active tree.")] = None,
    placement: Annotated[str | None, typer.Option(
        "--placement", metavar="|".join(PLACEMENTS),
        help="model: the search descent files each service (default, `placement` in \\[lifecycle]); embedding: the "
             "most similar leaf by embedding similarity, no LLM.")] = None,
    resplit: Annotated[bool, typer.Option("--resplit/--no-resplit", help="Split again, with the model, the leaves "
                                          "placement pushed past θ_leaf.")] = True,
    activate: Annotated[bool, typer.Option("--activate/--no-activate", help="Make the new version the active tree "
                                           "(--no-activate: inspect it first with `tree diff`).")] = True,
    no_cache: NoCacheOption = False,
    db: DbOption = None,
    json_output: JsonOption = False,
    engine_options: EngineOptions = None,  # type: ignore[assignment]  (filled by with_engine_options)
) -> None:
    """Place services added or changed since a tree was made into a new version of it, and take removed ones out.

    The tree it starts from keeps serving until the new version is activated.

    Example: a2x-local tree update --model qwen2.5-7b --no-activate --json
    """
    if placement is not None and placement not in PLACEMENTS:
        raise typer.BadParameter(f"use one of: {', '.join(PLACEMENTS)}", param_hint="--placement")
    settings = settings_for(ctx, db)
    load = engine_loader(settings, engine_options, no_cache)
    outcome = with_round_progress(json_output, lambda observer: run_update(
        settings, load_engine=load, model=model_label(settings, engine_options), base_id=base, placement=placement,
        resplit=resplit, activate=activate, observer=observer))
    if json_output:
        print_json(outcome.to_dict())
        return
    changes = outcome.changes
    title = (f"Tree {outcome.build_id} made from tree {outcome.base_id}" + ("; now active" if outcome.activated
                                                                             else "; not active")
             if outcome.build_id is not None else f"Tree {outcome.base_id}: nothing to update")
    table = Table(title=title)
    table.add_column("step")
    table.add_column("services", justify="right")
    table.add_column("detail", overflow="fold")
    table.add_row("placed (new)", f"{len(changes.added):,}", f"by {outcome.placement}")
    table.add_row("placed again (changed)", f"{len(changes.changed):,}", f"by {outcome.placement}")
    table.add_row("taken out (removed)", f"{len(changes.removed):,}", shown(", ".join(changes.removed[:_SHOWN])))
    table.add_row("leaves over θ_leaf after placement", f"{len(outcome.overfull):,}",
                  shown(", ".join(f"{x['node']} ({x['services']})" for x in outcome.overfull[:_SHOWN])))
    table.add_row("re-split with the model", f"{len(outcome.split):,}", shown(", ".join(outcome.split[:_SHOWN])))
    table.add_row("still over θ_leaf", f"{len(outcome.still_overfull):,}",
                  shown(", ".join(f"{x['node']} ({x['services']}, depth {x['depth']})"
                                  for x in outcome.still_overfull[:_SHOWN])))
    console.print(table, highlight=False)
    for placed in list(outcome.placements.values())[:_SHOWN]:
        where = ", ".join(placed.nodes)
        score = f" (similarity {placed.score:.2f})" if placed.score is not None else ""
        console.print(f"  {shown(placed.service)} → {shown(where)}{score}", highlight=False)
    if outcome.usage.by_label:
        console.print(outcome.usage.table(title="Model calls by call type"))
    for note in outcome.notes:
        err_console.print(f"[yellow]note:[/yellow] {shown(note)}")


@tree_app.command("diff")
def diff_command(
    ctx: typer.Context,
    a: Annotated[int, typer.Argument(help="The older tree's id.", show_default=False)],
    b: Annotated[int, typer.Argument(help="The newer tree's id.", show_default=False)],
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """What changed from tree A to tree B: categories added, removed or renamed, services moved, appeared, vanished.

    Categories are matched by path and name (renamed: same place, mostly the same services).

    Example: a2x-local tree diff 3 4 --json
    """
    with open_registry_db(settings_for(ctx, db)) as con:
        diff = diff_trees(load_tree(con, a), load_tree(con, b))
    if json_output:
        print_json(diff.to_dict())
        return
    table = Table(title=f"Tree {a} → tree {b}" + (" (identical)" if diff.identical else ""))
    table.add_column("change")
    table.add_column("count", justify="right")
    for key, value in diff.counts().items():
        table.add_row(key.replace("_", " "), f"{value:,}")
    console.print(table)
    sections = [("category added", [x["path"] for x in diff.categories_added]),
                ("category removed", [x["path"] for x in diff.categories_removed]),
                ("category renamed", [f"{x['from']} → {x['to']}" for x in diff.categories_renamed]),
                ("service appeared", diff.services_appeared), ("service vanished", diff.services_vanished),
                ("service moved", [f"{x['service']}: {' | '.join(x['from'])} → {' | '.join(x['to'])}"
                                   for x in diff.services_moved])]
    for label, lines in sections:
        for line in lines[:_SHOWN]:
            console.print(f"  {label}: {shown(line)}", highlight=False)
        if len(lines) > _SHOWN:
            console.print(f"  ... {len(lines) - _SHOWN:,} more ({label}; see --json)")


_EXIT_HELP = "; ".join(f"{code} {meaning}" for code, meaning in sorted(EXIT_CODES.items()))


@app.command("nightly", help=f"""Sync the registry from an export, then build or update the tree when anything
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
    max_drop: Annotated[float | None, typer.Option("--max-drop", min=0, max=100, help="Gate: most hit-rate points "
                                                   "the new tree may lose (default: \\[lifecycle] max_drop).")]
    = None,
    keep: Annotated[int | None, typer.Option("--keep", min=1, help="Completed trees to keep, newest first; the active "
                                             "tree is never deleted (default: \\[lifecycle] keep_trees).")] = None,
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
    outcome = with_round_progress(json_output,
                                  lambda observer: run_nightly(settings, request, load, observer=observer))
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
