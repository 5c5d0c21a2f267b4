"""Versioned trees: tree list|show|stats|export|import|activate|delete."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from rich.tree import Tree as RichTree

from a2x_local.cli.app import app
from a2x_local.cli.common import (
    DbOption,
    JsonOption,
    console,
    err_console,
    open_registry_db,
    print_json,
    settings_for,
    shown,
)
from a2x_local.errors import UserError
from a2x_local.registry import Registry
from a2x_local.taxonomy import (
    Tree,
    activate,
    active_build_id,
    build_running,
    delete_build,
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

tree_app = typer.Typer(help="List, inspect, export, import and switch taxonomy trees.", no_args_is_help=True)
app.add_typer(tree_app, name="tree")

TreeIdOption = Annotated[int | None, typer.Option("--id", help="Tree (build) id; default: the active tree.")]


def _load(con, build_id: int | None) -> Tree:
    return load_tree(con, build_id) if build_id is not None else load_active_tree(con)


def _stale_note(con, build_id: int | None, fingerprint: str) -> str | None:
    if fingerprint and fingerprint != Registry(con).fingerprint():
        return (f"tree {build_id} was built for another state of the registry (services changed since);"
                " rebuild with `a2x-local build`")
    return None


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
    table = Table(title="Trees (* = active)")
    for column in ("id", "kind", "status", "created", "model", "services", "leaves", "rounds", "note"):
        table.add_column(column, justify="right" if column in ("id", "services", "leaves", "rounds") else "left",
                         no_wrap=column in ("id", "kind", "status", "created"))
    for r in records:
        leaves = r.stats.get("tree", {}).get("leaves", "")
        note = r.error or r.source or (f"from tree {r.parent_id}" if r.parent_id is not None else "")
        model = Path(r.model).name if r.model and "/" in r.model else (r.model or "")
        table.add_row(f"{r.id}{'*' if r.active else ''}", r.kind, r.status, r.created_at.strftime("%m-%d %H:%M"),
                      shown(model), f"{r.service_count:,}", str(leaves), str(r.rounds), shown(note[:80]))
    console.print(table)


@tree_app.command("show")
def show_command(
    ctx: typer.Context,
    node: Annotated[str | None, typer.Argument(help="Node id to start from (default: the root).")] = None,
    depth: Annotated[int, typer.Option("--depth", "-d", min=0, help="Levels below NODE to print.")] = 2,
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
    console.print(view)
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
        out.write_text(text, encoding="utf-8")
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
    with open_registry_db(settings_for(ctx, db)) as con:
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
def activate_command(ctx: typer.Context, build_id: Annotated[int, typer.Argument(help="Tree id.")],
                     db: DbOption = None, json_output: JsonOption = False) -> None:
    """Make a completed tree the one searches use.

    Example: a2x-local tree activate 3
    """
    with open_registry_db(settings_for(ctx, db)) as con:
        activate(con, build_id)
    if json_output:
        print_json({"active": build_id})
    else:
        console.print(f"tree {build_id} is now active")


@tree_app.command("delete")
def delete_command(
    ctx: typer.Context,
    build_id: Annotated[int, typer.Argument(help="Tree id.")],
    force: Annotated[bool, typer.Option("--force", help="Also delete the active tree (none is active after).")]
    = False,
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Delete a tree and everything recorded with it.

    Example: a2x-local tree delete 2
    """
    settings = settings_for(ctx, db)
    with open_registry_db(settings) as con:
        record = get_build(con, build_id)
        if record.status == "running" and build_running(settings.db_path):
            raise UserError(f"tree {build_id} is being built right now", hint="wait for the build to finish")
        delete_build(con, build_id, force=force)
    if json_output:
        print_json({"deleted": build_id})
    else:
        console.print(f"deleted tree {build_id}")
