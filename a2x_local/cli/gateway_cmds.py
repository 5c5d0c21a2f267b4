"""`a2x-local gateway show|check` (the gateway file, and the tools of its servers registered as services) and
`a2x-local audit` (the calls made through the gateway)."""

from __future__ import annotations

import csv
import io
import re
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from a2x_local.cli.options import DbOption, JsonOption, open_registry_db, settings_for
from a2x_local.cli.output import console, print_error, print_json, shown
from a2x_local.db import transaction
from a2x_local.errors import UserError
from a2x_local.gateway import (
    OUTCOMES,
    AuditFilter,
    GatewayConfig,
    GatewayError,
    GatewayFile,
    GatewayFileError,
    check_servers,
    gateway_path,
    load_gateway_file,
    prune,
    query_audit,
    resolve_servers,
)
from a2x_local.outfiles import write_output
from a2x_local.registry import Limits, Registry, RegistryConfig
from a2x_local.settings import Settings

# This module's commands; the composition root (cli/app.py) adds them to the application.
commands = typer.Typer()

gateway_app = typer.Typer(help="The gateway: which MCP servers `serve` may call, and their tools as services.",
                          no_args_is_help=True)
commands.add_typer(gateway_app, name="gateway")

GatewayOption = Annotated[Path | None, typer.Option(
    "--gateway", show_default=False, help="Gateway file (default: \\[gateway] file, else $A2X_HOME/gateway.toml).")]


def _gateway_file(settings: Settings, given: Path | None) -> tuple[GatewayConfig, GatewayFile]:
    config = GatewayConfig.from_settings(settings)
    path = gateway_path(settings, config, given)
    if path is None:
        raise GatewayFileError(f"no gateway file: {settings.home / 'gateway.toml'} does not exist",
                               hint="write one (docs/gateway.md), or name it with --gateway FILE")
    return config, load_gateway_file(path)


@gateway_app.command("show")
def show_command(ctx: typer.Context, gateway: GatewayOption = None, db: DbOption = None,
                 json_output: JsonOption = False) -> None:
    """Check the gateway file and show its servers (how each is reached) and profiles; connects to nothing.

    Example: a2x-local gateway show --gateway gateway.toml
    """
    settings = settings_for(ctx, db)
    _, file = _gateway_file(settings, gateway)
    services = {}
    if settings.db_path.is_file():
        with open_registry_db(settings, mode="read") as con:
            services = {s.id: s for s in Registry(con).list(service_type="mcp_server")}
    entries, problems = resolve_servers(file, services)
    servers = [{"server": name, "ok": name in entries,
                "connection": (f"{entries[name].origin}: {entries[name].target.describe()}" if name in entries
                               else problems[name].message)} for name in file.servers]
    profiles = [{"profile": name, "tokens": len(spec.tokens), "see": spec.see, "call": spec.call, "deny": spec.deny,
                 "descriptions": len(spec.descriptions)} for name, spec in file.profiles.items()]
    if json_output:
        print_json({"file": file.path, "servers": servers, "profiles": profiles})
        return
    console.print(f"gateway file {shown(file.path)}: {len(servers)} servers, {len(profiles)} profiles", highlight=False)
    table = Table(title="Servers")
    for column in ("server", "reached by"):
        table.add_column(column, overflow="fold")
    for server in servers:
        table.add_row(shown(server["server"]), shown(server["connection"] if server["ok"] else
                                                     f"[not reachable] {server['connection']}"))
    console.print(table, highlight=False)
    table = Table(title="Profiles (default: no token; sees everything, calls nothing unless it says so)")
    for column in ("profile", "tokens", "see", "call", "deny"):
        table.add_column(column, overflow="fold")
    for profile in profiles:
        table.add_row(shown(profile["profile"]), str(profile["tokens"]), shown(", ".join(profile["see"])),
                      shown(", ".join(profile["call"]) or "(nothing)"), shown(", ".join(profile["deny"])))
    console.print(table, highlight=False)


@gateway_app.command("check")
def check_command(
    ctx: typer.Context,
    server: Annotated[list[str] | None, typer.Option("--server", show_default=False,
                                                     help="Check only this server (repeatable).")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Connect and list, write nothing to the registry.")]
    = False,
    gateway: GatewayOption = None,
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Connect to each server of the gateway file (official MCP SDK client), read its tools/list, and register
    every tool as a service SERVER/TOOL (with its inputSchema) under its server; tools it no longer lists are
    removed. Exits 1 when a server could not be checked (the others are registered).

    Example: a2x-local gateway check --gateway gateway.toml --server clock
    """
    settings = settings_for(ctx, db)
    config, file = _gateway_file(settings, gateway)
    limits = Limits.from_config(RegistryConfig.from_settings(settings))
    folder = settings.home / "gateway" / "tools"

    def open_db() -> AbstractContextManager[Any]:   # the registry, written under its lock
        return open_registry_db(settings, mode="read" if dry_run else "write", job="gateway check")

    results = []
    for found in check_servers(file, config, open_db, folder, limits, only=server or None, dry_run=dry_run):
        results.append(found)
        if not json_output:
            if found.ok:
                console.print(f"{shown(found.server)}: {len(found.tools)} tools ({found.seconds:.1f} s): "
                              f"{len(found.added)} added, {len(found.updated)} updated, {len(found.removed)} removed, "
                              f"{found.unchanged} unchanged" + (" (dry run: nothing written)" if dry_run else ""),
                              highlight=False)
            else:
                console.print(f"{shown(found.server)}: FAILED: {shown(found.error or '')}", highlight=False)
    failed = [found for found in results if not found.ok]
    if json_output:
        print_json({"file": file.path, "dry_run": dry_run, "failed": len(failed),
                    "servers": [found.to_dict() for found in results]})
    if failed:
        first = failed[0]
        error = GatewayError(f"{len(failed)} of {len(results)} servers could not be checked: {first.error}",
                             code="CheckFailed", hint=first.hint or "see the lines above")
        if not json_output:
            raise error
        print_error(error)          # stdout holds the one report; the error line goes to stderr
        raise typer.Exit(1)


_DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhdw])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_since(value: str) -> datetime:
    """A time in UTC: a duration before now ("30m", "12h", "7d") or an ISO date or time ("2026-12-01")."""
    match = _DURATION.match(value.strip())
    now = datetime.now(UTC).replace(tzinfo=None)
    if match:
        return now - timedelta(seconds=float(match.group(1)) * _UNITS[match.group(2)])
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError as exc:
        raise typer.BadParameter(f"'{value}' is neither a duration (30m, 12h, 7d) nor an ISO date or time",
                                 param_hint="--since") from exc
    return parsed.astimezone(UTC).replace(tzinfo=None) if parsed.tzinfo else parsed


@commands.command("audit")
def audit_command(
    ctx: typer.Context,
    since: Annotated[str | None, typer.Option("--since", show_default=False,
                                              help="Only calls since then: 30m, 12h, 7d, or an ISO date/time "
                                                   "(UTC).")] = None,
    service: Annotated[str | None, typer.Option("--service", show_default=False,
                                                help="Only services matching this glob, e.g. 'clock/*'.")] = None,
    profile: Annotated[str | None, typer.Option("--profile", show_default=False, help="Only this profile.")] = None,
    outcome: Annotated[str | None, typer.Option("--outcome", show_default=False,
                                                help=f"Only this outcome: {' | '.join(OUTCOMES)}.")] = None,
    limit: Annotated[int | None, typer.Option("--limit", min=1, max=1_000_000_000, show_default=False,
                                              help="At most this many rows, newest first (default: 50 on screen, "
                                                   "all with --json or --csv).")] = None,
    csv_path: Annotated[Path | None, typer.Option("--csv", show_default=False,
                                                  help="Write the rows to this CSV file.")] = None,
    prune_rows: Annotated[bool, typer.Option("--prune", help="Delete rows older than \\[gateway] "
                                             "audit_retention_days first.")] = False,
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """The calls made through the gateway (`serve`), allowed or refused, newest first: filter, list, export.

    Rows hold the time (UTC), profile, client, service, tool, the SHA-256 and a redacted preview of the arguments,
    duration, outcome, result size and error; argument and result text only with \\[gateway] audit_text.

    Example: a2x-local audit --since 24h --outcome denied --json
    """
    if outcome is not None and outcome not in OUTCOMES:
        raise typer.BadParameter(f"unknown outcome '{outcome}'; choose one of: {', '.join(OUTCOMES)}",
                                 param_hint="--outcome")
    settings = settings_for(ctx, db)
    if not settings.db_path.is_file():
        raise UserError(f"{settings.db_path}: no registry database here", hint="point --db at the served registry")
    selection = AuditFilter(since=parse_since(since) if since else None, service=service, profile=profile,
                            outcome=outcome, limit=limit or (None if json_output or csv_path else 50))
    pruned = None
    if prune_rows:
        config = GatewayConfig.from_settings(settings)
        with open_registry_db(settings, mode="write", job="audit --prune") as con, transaction(con):
            pruned = prune(con, config.audit_retention_days)
    with open_registry_db(settings, mode="read") as con:
        rows = query_audit(con, selection, settings.db_path)
    if csv_path is not None:
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=list(rows[0]) if rows else ["id"], lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        write_output(csv_path, buffer.getvalue(), what="CSV file")
    if json_output:
        print_json({"rows": rows, "pruned": pruned} if pruned is not None else rows)
        return
    if pruned is not None:
        console.print(f"pruned {pruned:,} rows older than the retention", highlight=False)
    if csv_path is not None:
        console.print(f"wrote {len(rows):,} rows to {shown(str(csv_path))}", highlight=False)
        return
    table = Table(title=f"Gateway calls ({len(rows):,} shown, newest first)")
    for column in ("time (UTC)", "profile", "service", "outcome", "ms", "bytes", "error"):
        table.add_column(column, overflow="fold")
    for row in rows:      # the error's code on screen; --json and --csv carry its message
        table.add_row(str(row["called_at"])[:19], shown(row["profile"]), shown(row["service_id"]), row["outcome"],
                      f"{row['duration_ms']:.0f}", str(row["result_bytes"] or ""),
                      shown((row["error"] or "").split(":", 1)[0]))
    console.print(table, highlight=False)
