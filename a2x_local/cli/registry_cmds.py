"""Registry commands: ingest, services list|show|remove, stats."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from a2x_local import provenance
from a2x_local.cli.options import DbOption, JsonOption, config_flag, open_registry_db, settings_for
from a2x_local.cli.output import console, print_json, shown
from a2x_local.cli.tables import CUT, REST, Column, print_table
from a2x_local.db import software_history, transaction
from a2x_local.registry import (
    FORMATS,
    ConflictError,
    IngestReport,
    Limits,
    Registry,
    RegistryConfig,
    Skipped,
    SyncRefusedError,
    SyncReport,
    ingest,
    sync,
)
from a2x_local.search import dense_index_choice

# This module's commands; the composition root (cli/app.py) adds them to the application.
commands = typer.Typer()

services_app = typer.Typer(help="Inspect and edit the services in the registry.", no_args_is_help=True)
commands.add_typer(services_app, name="services")

# Rows `services list` may show or skip: more than any registry holds, and inside DuckDB's BIGINT (`--offset
# 99999999999999999999` and `--limit -5` ended in DuckDB errors).
ROWS_MAX = 1_000_000_000
_FORMAT_HELP = "Input format: " + "; ".join(f"[bold]{k}[/bold] = {v}" for k, v in FORMATS.items())


def _print_report(report: IngestReport, db: Path) -> None:
    table = Table(title=f"Ingest into {db}")
    for column in ("file", "format", "services"):
        table.add_column(column, justify="right" if column == "services" else "left")
    for summary in report.files:
        table.add_row(shown(summary.path), summary.format, f"{summary.services:,}")
    console.print(table)
    added, updated = ("would add", "would update") if report.dry_run else ("added", "updated")
    console.print(f"{added} [green]{len(report.added):,}[/green], {updated} [yellow]{len(report.updated):,}"
                  f"[/yellow], unchanged {len(report.unchanged):,}" + (" (dry run: nothing written)"
                                                                        if report.dry_run else ""))
    for change in report.updated[:20]:
        console.print(f"  {updated} {shown(change.id)} ({', '.join(change.fields)})", highlight=False)
    if len(report.updated) > 20:
        console.print(f"  ... and {len(report.updated) - 20:,} more")
    _print_lookalikes(report.lookalikes)
    _print_skipped(report.skipped)


def _print_lookalikes(found: list[Any]) -> None:
    """Ids let in with --allow-lookalikes, each with the one it looks like."""
    for look in found[:20]:
        console.print(f"[yellow]lookalike:[/yellow] {shown(look.id)} {shown(look.why)}", highlight=False,
                      soft_wrap=True)
    if len(found) > 20:
        console.print(f"  ... and {len(found) - 20:,} more lookalike ids (--json lists them all)")


def _print_skipped(skipped: list[Skipped]) -> None:
    """The folder entries that were not read (a walk reads everything or says what it left out)."""
    if not skipped:
        return
    console.print(f"skipped {len(skipped):,} folder entries that are not service files (--json lists them all):")
    for entry in skipped[:10]:
        console.print(f"  {shown(entry.path)}: {entry.reason}", highlight=False, soft_wrap=True)
    if len(skipped) > 10:
        console.print(f"  ... and {len(skipped) - 10:,} more")


@commands.command("ingest")
def ingest_command(
    ctx: typer.Context,
    paths: Annotated[list[Path], typer.Argument(help="Files or folders to read.", show_default=False,
                                                  metavar="PATH...")],
    fmt: Annotated[str, typer.Option("--format", "-f", help=_FORMAT_HELP)] = "auto",
    replace: Annotated[bool, typer.Option("--replace", help="Update services whose id exists with changed "
                                          "content (otherwise they are conflicts and nothing is written).")] = False,
    server: Annotated[str | None, typer.Option("--server", help="MCP server name for tools/list files "
                                               "(ids become SERVER/TOOL); default: from the file.")] = None,
    max_description_chars: config_flag(RegistryConfig, "max_description_chars", "--max-description-chars",
                                       help="Reject longer descriptions (default: \\[registry] "
                                            "max_description_chars).") = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Check and report, write nothing.")] = False,
    sync_registry: Annotated[bool, typer.Option("--sync", help="Make the registry equal the input: add, update, and "
                                                "remove services the input no longer has.")] = False,
    force: Annotated[bool, typer.Option("--force", help="With --sync: remove services even beyond the allowed "
                                        "share (\\[registry] sync_max_remove_share).")] = False,
    allow_lookalikes: Annotated[bool | None, typer.Option(
        "--allow-lookalikes/--no-allow-lookalikes", show_default=False,
        help="Store ids that look like others (case, Unicode form, invisible characters, mixed scripts) instead of "
             "refusing the ingest; they are listed in the report (default: \\[registry] allow_lookalikes).")] = None,
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Load services from files or folders into the registry, all or nothing.

    With --sync the registry afterwards holds exactly the input's services (a nightly export).

    Example: a2x-local ingest data/sample data/toolret/services.json --json
    """
    settings = settings_for(ctx, db)
    config = RegistryConfig.from_settings(settings, max_description_chars=max_description_chars,
                                          allow_lookalikes=allow_lookalikes)
    limits = Limits.from_config(config)
    if force and not sync_registry:
        raise typer.BadParameter("--force only applies to --sync", param_hint="--force")
    if sync_registry:
        _sync(settings, paths, config, limits, fmt=fmt, server=server, force=force, dry_run=dry_run,
              json_output=json_output)
        return
    with open_registry_db(settings, mode="read" if dry_run else "write", job="ingest") as con:
        try:
            report = ingest(con, paths, fmt=fmt, replace=replace, limits=limits, server=server, dry_run=dry_run,
                            allow_lookalikes=config.allow_lookalikes)
        except ConflictError as exc:
            if not json_output:
                for change in exc.report.conflicts[:20]:
                    console.print(f"  conflict {shown(change.id)} ({', '.join(change.fields)} differ)",
                                  highlight=False)
            raise
        total = Registry(con).count()
    # A dry run wrote nothing: the registry holds what it held, and would hold that plus what it would add.
    before, after = (total, total + len(report.added)) if dry_run else (total - len(report.added), total)
    if json_output:
        print_json(report.to_dict() | {"services_before": before, "services_after": after})
    else:
        _print_report(report, settings.db_path)
        verb = "would hold" if dry_run else "now holds"
        console.print(f"registry {verb} {after:,} services (before: {before:,})")


def _sync(settings, paths: list[Path], config: RegistryConfig, limits: Limits, *, fmt: str, server: str | None,
          force: bool, dry_run: bool, json_output: bool) -> None:
    with open_registry_db(settings, mode="read" if dry_run else "write", job="ingest --sync") as con:
        try:
            report = sync(con, paths, max_remove_share=config.sync_max_remove_share, fmt=fmt, limits=limits,
                          server=server, force=force, dry_run=dry_run, allow_lookalikes=config.allow_lookalikes)
        except SyncRefusedError as exc:
            if not json_output:
                _print_sync(exc.report, settings.db_path, refused=True)
            raise
    if json_output:
        print_json(report.to_dict())
    else:
        _print_sync(report, settings.db_path)


def _print_sync(report: SyncReport, db: Path, *, refused: bool = False) -> None:
    table = Table(title=f"Sync of {db}" + (" (refused: nothing changed)" if refused else
                                           " (dry run: nothing changed)" if report.dry_run else ""))
    table.add_column("change")
    table.add_column("services", justify="right")
    rows = (("added", report.added), ("updated", [c.id for c in report.updated]), ("removed", report.removed))
    for label, ids in rows:
        table.add_row(label, f"{len(ids):,}")
    table.add_row("unchanged", f"{report.unchanged:,}")
    console.print(table, highlight=False)
    # The ids under the table, never in a cell: a cell would fold them, and ids are what users copy.
    for label, ids in rows:
        if ids:
            listed = ", ".join(ids[:10]) + (f" ... {len(ids) - 10:,} more (--json lists them all)"
                                            if len(ids) > 10 else "")
            console.print(f"{label}: {shown(listed)}", highlight=False, soft_wrap=True)
    verb = "would hold" if refused or report.dry_run else "now holds"
    console.print(f"registry {verb} {report.after:,} services (before: {report.before:,})")
    _print_lookalikes(report.lookalikes)
    _print_skipped(report.skipped)


@commands.command("stats")
def stats_command(ctx: typer.Context, db: DbOption = None, json_output: JsonOption = False) -> None:
    """Counts by type and source, description lengths, the registry fingerprint, and the software that wrote it.

    The software lines show the running install (version, commit, offline bundle) and each install that created or
    upgraded this file, so an upgrade from one bundle to the next can be traced.

    Example: a2x-local stats --json
    """
    settings = settings_for(ctx, db)
    with open_registry_db(settings, mode="read") as con:
        stats = Registry(con).stats()
        history = software_history(con)
    software = provenance.current()
    index = dense_index_choice(settings, stats.services)
    if json_output:
        print_json(stats.to_dict() | {"db": str(settings.db_path), "dense_index": index,
                                      "software": software.to_dict(), "software_history": history})
        return
    console.print(f"[bold]{settings.db_path}[/bold]: {stats.services:,} services, {stats.ingest_runs} ingest runs")
    if not stats.services:
        console.print("the registry is empty: load services with `a2x-local ingest PATH...`")
        _print_software(software, history)
        return
    for title, counts in (("by type", stats.by_type), ("by source", stats.by_source)):
        table = Table(title=title)
        table.add_column(title.split()[1])
        table.add_column("services", justify="right")
        rows = list(counts.items())
        for key, value in rows[:15]:
            table.add_row(shown(key), f"{value:,}")
        if len(rows) > 15:
            table.add_row(f"... {len(rows) - 15:,} more (see --json)", f"{sum(v for _, v in rows[15:]):,}")
        console.print(table)
    lengths = stats.description_chars
    console.print("description chars: " + ", ".join(f"{k} {v:,.0f}" for k, v in lengths.items()))
    console.print(f"fingerprint: {stats.fingerprint}")
    params = ", ".join(f"{k} {v:,}" for k, v in index.items() if k not in ("index", "reason"))
    console.print(f"dense index: {index['index']}{f' ({params})' if params else ''}: {index['reason']}"
                  " (\\[retrieval] dense_index, approximate_above)")
    _print_software(software, history)


def _print_software(software: provenance.Provenance, history: list[dict]) -> None:
    console.print(f"software: {software.describe()}", highlight=False)
    for row in history:
        before, after = row["schema_from"], row["schema_to"]
        change = (f"created it (schema {after})" if before == 0 else
                  f"migrated schema {before} -> {after}" if before != after else f"opened it (schema {after})")
        who = row["software"] or row["note"]
        console.print(f"  {row['seen_at'][:19]}  {who}" + (f": {change}" if row["software"] else ""), highlight=False)


# Ids and types whole, names cut, the description in what is left (see `tables`).
SERVICE_COLUMNS = (Column("id"), Column("type"), Column("name", CUT, most=32), Column("description", REST))


@services_app.command("list")
def list_command(
    ctx: typer.Context,
    service_type: Annotated[str | None, typer.Option("--type", help="Only this type.")] = None,
    source: Annotated[str | None, typer.Option("--source", help="Only sources containing this text.")] = None,
    limit: Annotated[int, typer.Option(min=0, max=ROWS_MAX, help="At most this many (0 = all).")] = 50,
    offset: Annotated[int, typer.Option(min=0, max=ROWS_MAX, help="Skip this many first.")] = 0,
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """List services, ordered by id.

    Example: a2x-local services list --type mcp_tool --limit 20
    """
    settings = settings_for(ctx, db)
    with open_registry_db(settings, mode="read") as con:
        registry = Registry(con)
        services = registry.list(service_type=service_type, source=source, limit=limit or None, offset=offset)
        total = registry.count()
    if json_output:
        print_json([s.to_dict() for s in services])
        return
    rows = [(s.id, s.type, s.name, s.description[:300]) for s in services]
    print_table(console, f"{len(services):,} of {total:,} services", SERVICE_COLUMNS, rows)


@services_app.command("show")
def show_command(ctx: typer.Context, service_id: Annotated[str, typer.Argument(metavar="ID")],
                 db: DbOption = None, json_output: JsonOption = False) -> None:
    """Everything stored about one service.

    Example: a2x-local services show skill/pdf
    """
    settings = settings_for(ctx, db)
    with open_registry_db(settings, mode="read") as con:
        service = Registry(con).require(service_id)
    if json_output:
        print_json(service.to_dict())
        return
    console.print(f"[bold]{shown(service.id)}[/bold] ({service.type})", highlight=False)
    console.print(f"name: {shown(service.name)}", highlight=False)
    console.print(f"description: {shown(service.description)}", highlight=False)
    console.print(f"source: {shown(service.source)}", highlight=False)
    if service.parameters_schema is not None:
        console.print("parameters (JSON Schema):", highlight=False)
        console.print_json(data=service.parameters_schema)
    else:
        console.print("parameters: none described", highlight=False)
    console.print("metadata (as ingested):", highlight=False)
    console.print_json(data=service.metadata)


@services_app.command("remove")
def remove_command(ctx: typer.Context,
                   service_ids: Annotated[list[str], typer.Argument(metavar="ID...", show_default=False)],
                   db: DbOption = None, json_output: JsonOption = False) -> None:
    """Delete services by id (all or none).

    Example: a2x-local services remove mcp_service_1 mcp_service_2
    """
    settings = settings_for(ctx, db)
    with open_registry_db(settings, job="services remove") as con, transaction(con):
        removed = Registry(con).remove(service_ids)
    if json_output:
        print_json({"removed": removed, "removed_ids": service_ids})   # named as ingest and sync name them
    else:
        console.print(f"removed {removed} service(s)")
