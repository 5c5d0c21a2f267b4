"""Versioned trees: tree list|show|stats|export|import|activate|delete, `tree update` (incremental placement)
and `tree diff A B`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from rich.tree import Tree as RichTree

from a2x_local.cli.options import (
    DbOption,
    JsonOption,
    NoCacheOption,
    engine_loader,
    model_label,
    open_registry_db,
    settings_for,
    with_engine_options,
)
from a2x_local.cli.output import console, err_console, print_json, shown, with_round_progress
from a2x_local.cli.tables import CUT, REST, Column, print_table
from a2x_local.errors import UserError
from a2x_local.lifecycle import PLACEMENTS, run_update
from a2x_local.llm import EngineOptions
from a2x_local.outfiles import write_output
from a2x_local.registry import Registry
from a2x_local.taxonomy import (
    Tree,
    activate,
    active_build_id,
    build_running,
    delete_build,
    diff_trees,
    get_build,
    import_tree,
    list_builds,
    load_active_tree,
    load_tree,
    load_usage,
    read_tree_file,
    save_import,
    to_dot,
    to_json,
)

# This module's commands; the composition root (cli/app.py) adds them to the application.
commands = typer.Typer()

tree_app = typer.Typer(help="List, inspect, export, import and switch taxonomy trees.", no_args_is_help=True)
commands.add_typer(tree_app, name="tree")

_SHOWN = 20  # changes listed by `tree update` and `tree diff` (--json has them all)

# Tree (build) ids are DuckDB INTEGERs from 1: a larger one ended in a DuckDB error, not a usage error.
TREE_ID_MAX = 2**31 - 1
TreeIdOption = Annotated[int | None, typer.Option("--id", min=1, max=TREE_ID_MAX,
                                                  help="Tree (build) id; default: the active tree.")]
TreeIdArgument = Annotated[int, typer.Argument(min=1, max=TREE_ID_MAX, help="Tree id.")]
# Levels `tree show` prints: the deepest tree `tree import` takes has 32 (a build stops at [build] max_depth, 8).
_DEPTH_MAX = 32


def _load(con, build_id: int | None) -> Tree:
    return load_tree(con, build_id) if build_id is not None else load_active_tree(con)


def _stale_note(con, build_id: int | None, fingerprint: str) -> str | None:
    if fingerprint and fingerprint != Registry(con).fingerprint():
        return (f"tree {build_id} was built for another state of the registry (services changed since);"
                " rebuild with `a2x-local build`")
    return None


# Ids, counts and dates whole with their headers, the model name cut, the note in what is left (see `tables`).
TREE_COLUMNS = (Column("id", justify="right"), Column("kind"), Column("status"), Column("created"),
                Column("model", CUT, most=40), Column("services", justify="right"),
                Column("leaves", justify="right"), Column("rounds", justify="right"), Column("note", REST))


@tree_app.command("list")
def list_command(ctx: typer.Context, db: DbOption = None, json_output: JsonOption = False) -> None:
    """List every build and import, the active one marked.

    Example: a2x-local tree list --json
    """
    with open_registry_db(settings_for(ctx, db), mode="read") as con:
        records = list_builds(con)
    if json_output:
        print_json([r.to_dict() for r in records])
        return
    if not records:
        console.print("no trees yet: build one with `a2x-local build --model ALIAS`")
        return
    rows = []
    for r in records:
        leaves = r.stats.get("tree", {}).get("leaves", "")
        note = r.error or r.source or (f"from tree {r.parent_id}" if r.parent_id is not None else "")
        model = Path(r.model).name if r.model and "/" in r.model else (r.model or "")
        rows.append((f"{r.id}{'*' if r.active else ''}", r.kind, r.status, r.created_at.strftime("%m-%d %H:%M"),
                     model, f"{r.service_count:,}", str(leaves), str(r.rounds), note[:200]))
    print_table(console, "Trees (* = active)", TREE_COLUMNS, rows)


@tree_app.command("show")
def show_command(
    ctx: typer.Context,
    node: Annotated[str | None, typer.Argument(help="Node id to start from (default: the root).")] = None,
    depth: Annotated[int, typer.Option("--depth", "-d", min=0, max=_DEPTH_MAX, help="Levels below NODE to print.")] = 2,
    build_id: TreeIdOption = None,
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Print the tree: node names, ids and sizes (services in the subtree / held directly).

    Example: a2x-local tree show root/3 --depth 1
    """
    with open_registry_db(settings_for(ctx, db), mode="read") as con:
        tree = _load(con, build_id)
        note = _stale_note(con, tree.build_id, tree.registry_fingerprint)
    start = node or tree.root_id
    if start not in tree.nodes:
        raise UserError(f"no node '{start}' in tree {tree.build_id}",
                        hint=f"node ids look like {tree.root_id}/1/2; `a2x-local tree show` lists them")
    if json_output:
        print_json(_nested(tree, start, depth))
        return
    top = tree.nodes[start]
    view = RichTree(_label(tree, start))
    frontier = [(view, top.id, 0)]
    while frontier:
        branch, node_id, level = frontier.pop(0)
        if level >= depth:
            continue
        for child in tree.nodes[node_id].children:
            frontier.append((branch.add(_label(tree, child)), child, level + 1))
    console.print(view, soft_wrap=False)  # soft-wrapped, a tree is cut: wrap it
    if note:
        err_console.print(f"[yellow]note:[/yellow] {note}")


def _label(tree: Tree, node_id: str) -> str:
    node = tree.nodes[node_id]
    more = f", {len(node.children)} children" if node.children else ""
    return (f"[bold]{shown(node.name)}[/bold] [dim]{shown(node.id)}[/dim]  {tree.subtree_size(node_id):,} services"
            f" ({len(node.services):,} direct{more})")


def _nested(tree: Tree, node_id: str, depth: int) -> dict:
    node = tree.nodes[node_id]
    data = {"id": node.id, "name": node.name, "description": node.description, "depth": node.depth,
            "services": tree.subtree_size(node_id), "direct_services": len(node.services)}
    if depth > 0:
        data["children"] = [_nested(tree, child, depth - 1) for child in node.children]
    return data


@tree_app.command("stats")
def stats_command(ctx: typer.Context, build_id: TreeIdOption = None, db: DbOption = None,
                  json_output: JsonOption = False) -> None:
    """Tree shape (depth, leaves, leaf sizes, branching), tokens and calls by call type, rounds, wall time.

    Example: a2x-local tree stats --id 3 --json
    """
    with open_registry_db(settings_for(ctx, db), mode="read") as con:
        chosen = build_id if build_id is not None else active_build_id(con)
        record = get_build(con, chosen) if chosen is not None else None
        stored = record.stats.get("tree") if record is not None else None
        if stored is not None:
            # Builds and imports store the shape; through JSON its depth keys became strings.
            shape = stored | {"branching_by_depth": {int(k): v for k, v in stored["branching_by_depth"].items()}}
        else:   # no shape stored (or nothing active): the tree itself, or the error saying why there is none
            tree = _load(con, build_id)
            record = get_build(con, tree.build_id)
            shape = tree.stats().to_dict()
        usage = load_usage(con, record.id)
        note = _stale_note(con, record.id, record.registry_fingerprint)
    data = {"build": record.id, "kind": record.kind, "status": record.status, "model": record.model,
            "tree": shape, "engine_rounds": record.rounds, "wall_seconds": record.wall_seconds,
            "usage": usage.to_dict(), "leaves_over_limit": record.stats.get("leaves_over_limit", []),
            "counters": record.stats.get("counters", {}), "vocabulary": record.stats.get("vocabulary", []),
            "events": record.stats.get("events", []),
            "requests_per_round": record.stats.get("requests_per_round"), "stale": note is not None}
    if json_output:
        print_json(data)
        return
    table = Table(title=f"Tree {record.id} ({record.kind}, {record.model or record.source or ''})")
    table.add_column("statistic")
    table.add_column("value", justify="right")
    for key, value in shape.items():
        table.add_row(key.replace("_", " "), str(value))
    table.add_row("engine rounds", str(record.rounds))
    table.add_row("wall time", f"{record.wall_seconds:.1f} s")
    if data["leaves_over_limit"]:
        largest = data["leaves_over_limit"][0]
        table.add_row("leaves over θ_leaf", f"{len(data['leaves_over_limit'])} (largest {largest['node']}: "
                      f"{largest['services']})")
    for kind in ("shrunk", "skipped"):
        events = [e for e in data["events"] if e.get("what") == kind]
        if events:
            table.add_row(f"steps {kind} (context window)", ", ".join(f"{e['step']} at {e['node']}" for e in events))
    if data["counters"].get("repeated_text_cut"):
        table.add_row("texts cut where they repeated themselves", f"{data['counters']['repeated_text_cut']:,}")
    console.print(table)
    if usage.by_label:
        console.print(usage.table(title="Model calls by call type"))
    if note:
        err_console.print(f"[yellow]note:[/yellow] {note}")


@tree_app.command("export")
def export_command(
    ctx: typer.Context,
    fmt: Annotated[str, typer.Option("--format", "-f", help="json (the import format) or dot (Graphviz).")] = "json",
    out: Annotated[Path | None, typer.Option("--out", help="Write to this file instead of stdout.")] = None,
    build_id: TreeIdOption = None,
    db: DbOption = None,
) -> None:
    """Export a tree for other tools; `--format json` is what `tree import` reads back.

    Example: a2x-local tree export --format dot --out tree.dot && dot -Tsvg tree.dot > tree.svg
    """
    if fmt not in ("json", "dot"):
        raise typer.BadParameter(f"unknown format {fmt!r}; use json or dot", param_hint="--format")
    with open_registry_db(settings_for(ctx, db), mode="read") as con:
        tree = _load(con, build_id)
    text = to_json(tree) if fmt == "json" else to_dot(tree)
    if out is None:
        typer.echo(text, nl=False)
    else:
        write_output(out, text, what="exported tree")
        err_console.print(f"wrote tree {tree.build_id} ({len(tree.nodes)} nodes) to {out}")


@tree_app.command("import")
def import_command(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(
        help="JSON tree (docs/build.md: Imported trees), or a tree of the published A2X implementation: its folder,"
             " or its taxonomy.json with class.json beside it.", show_default=False)],
    activate: Annotated[bool, typer.Option("--activate/--no-activate",
                                           help="Make the imported tree the active one.")] = True,
    allow_missing: Annotated[bool, typer.Option(
        "--allow-missing", help="Drop service ids the registry lacks (reported) instead of refusing the tree.")]
    = False,
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Load a taxonomy made elsewhere (hand-curated, exported, or built by the A2X-registry project) as a tree that
    searches can use.

    Example: a2x-local tree import exported/taxonomy/ --allow-missing --no-activate
    """
    data = read_tree_file(file)
    with open_registry_db(settings_for(ctx, db), job="tree import") as con:
        registry = Registry(con)
        tree, warnings = import_tree(data, registry.ids(), source=str(file), allow_missing=allow_missing)
        build_id = save_import(con, tree, fingerprint=registry.fingerprint(), source=str(file),
                               activate=activate, warnings=warnings)
    stats = tree.stats()
    source_format = data.get("imported_from", "a2x-tree") if isinstance(data, dict) else "a2x-tree"
    result = {"build": build_id, "active": activate, "format": source_format, "nodes": len(tree.nodes),
              "leaves": stats.leaves, "services": len(tree.service_ids()),
              "mean_leaves_per_service": stats.mean_leaves_per_service, "warnings": warnings}
    if json_output:
        print_json(result)
        return
    state = "active" if activate else "not active (use `a2x-local tree activate`)"
    console.print(f"imported tree {build_id} ({source_format}): {len(tree.nodes)} nodes, {stats.leaves} leaves,"
                  f" {len(tree.service_ids()):,} services, {stats.mean_leaves_per_service} leaves per service;"
                  f" {state}")
    for warning in warnings:
        err_console.print(f"[yellow]warning:[/yellow] {warning}")


@tree_app.command("activate")
def activate_command(ctx: typer.Context, build_id: TreeIdArgument,
                     db: DbOption = None, json_output: JsonOption = False) -> None:
    """Make a completed tree the one searches use.

    Example: a2x-local tree activate 3
    """
    with open_registry_db(settings_for(ctx, db), job="tree activate") as con:
        activate(con, build_id)
    if json_output:
        print_json({"active": build_id})
    else:
        console.print(f"tree {build_id} is now active")


@tree_app.command("delete")
def delete_command(
    ctx: typer.Context,
    build_id: TreeIdArgument,
    force: Annotated[bool, typer.Option("--force", help="Also delete the active tree (none is active after).")]
    = False,
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Delete a tree and everything recorded with it.

    Example: a2x-local tree delete 2
    """
    settings = settings_for(ctx, db)
    with open_registry_db(settings, job="tree delete") as con:
        record = get_build(con, build_id)
        if record.status == "running" and build_running(settings.db_path):
            raise UserError(f"tree {build_id} is being built right now", hint="wait for the build to finish")
        delete_build(con, build_id, force=force)
    if json_output:
        print_json({"deleted": build_id})
    else:
        console.print(f"deleted tree {build_id}")


@tree_app.command("update")
@with_engine_options
def update_command(
    ctx: typer.Context,
    base: Annotated[int | None, typer.Option("--id", min=1, max=TREE_ID_MAX,
                                             help="Tree to start from; default: the active tree.")] = None,
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
        resplit=resplit, activate=activate, observer=observer), command="tree update")
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
    a: Annotated[int, typer.Argument(min=1, max=TREE_ID_MAX, help="The older tree's id.", show_default=False)],
    b: Annotated[int, typer.Argument(min=1, max=TREE_ID_MAX, help="The newer tree's id.", show_default=False)],
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """What changed from tree A to tree B: categories added, removed or renamed, services moved, appeared, vanished.

    Categories are matched by path and name (renamed: same place, mostly the same services).

    Example: a2x-local tree diff 3 4 --json
    """
    with open_registry_db(settings_for(ctx, db), mode="read") as con:
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
