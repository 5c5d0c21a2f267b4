"""`a2x-local gateway check`: connect to each server of the gateway file with the official SDK client, read its
`tools/list`, and register every tool as a service under its server (id `SERVER/TOOL`, type mcp_tool, its
inputSchema in the metadata), so a search finds tools, not only servers.

The listing a server gave is kept as a file (`$A2X_HOME/gateway/tools/SERVER.json`, the `tools/list` result) and
ingested like any other with the mcp-tools format: the same checks and limits, and one transaction per server. A
tool the server no longer lists is removed from the registry. A server that cannot be reached is reported and
changes nothing.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from a2x_local.db import transaction
from a2x_local.errors import A2XError
from a2x_local.gateway.config import GatewayConfig
from a2x_local.gateway.connections import ServerEntry, resolve_servers
from a2x_local.gateway.errors import GatewayError
from a2x_local.gateway.pool import GatewayLoop, Session
from a2x_local.gateway.spec import GatewayFile
from a2x_local.outfiles import write_output
from a2x_local.registry import Limits, Registry, ingest

MAX_PAGES = 100


@dataclass
class ServerCheck:
    """What the check found for one server."""

    server: str
    ok: bool
    connection: str = ""
    tools: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: int = 0
    seconds: float = 0.0
    error: str | None = None
    hint: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {key: value for key, value in self.__dict__.items()}


async def _list_tools(entry: ServerEntry, config: GatewayConfig) -> list[dict[str, Any]]:
    """Every tool the server lists (all pages), as plain JSON, through one session opened and closed here."""
    session = Session(entry, 1, entry.start_timeout_s or config.start_timeout_s, verbose=True)
    try:
        await session.wait_ready()
        tools: list[dict[str, Any]] = []
        cursor = None
        for _ in range(MAX_PAGES):
            try:
                page = await asyncio.wait_for(session.client.list_tools(cursor=cursor),
                                              entry.call_timeout_s or config.call_timeout_s)
            except TimeoutError:
                raise session._failure(f"did not answer tools/list within {config.call_timeout_s:g} s",
                                       code="ServerTimeout", status=504) from None
            tools += [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in page.tools]
            cursor = page.next_cursor
            if not cursor:
                break
        return tools
    finally:
        session.close()
        await session.closed.wait()


def _registered(con: duckdb.DuckDBPyConnection, server: str) -> set[str]:
    return {s.id for s in Registry(con).list(service_type="mcp_tool") if (s.metadata or {}).get("server") == server}


def register_tools(con: duckdb.DuckDBPyConnection, server: str, tools: list[dict[str, Any]], folder: Path,
                   limits: Limits, *, dry_run: bool = False) -> ServerCheck:
    """Make the registry's tools of ``server`` equal ``tools``: added and updated by the ingest of the listing
    (its transaction), then the tools it no longer lists removed (a second one). A failure between the two leaves
    the new listing's tools in and the gone ones still registered; the next check removes them."""
    listing = folder / f"{server.replace('/', '__')}.json"
    write_output(listing, json.dumps({"server": server, "tools": tools}, ensure_ascii=False, indent=1),
                 what="tools/list copy")
    found = ServerCheck(server, True, tools=[f"{server}/{tool['name']}" for tool in tools])
    before = _registered(con, server)
    gone = sorted(before - set(found.tools))
    if tools:
        report = ingest(con, [listing], fmt="mcp-tools", replace=True, limits=limits, server=server,
                        dry_run=dry_run)
        found.added = list(report.added)
        found.updated = [change.id for change in report.updated]
        found.unchanged = len(report.unchanged)
    if gone and not dry_run:
        with transaction(con):
            Registry(con).remove(gone)
    found.removed = gone
    return found


def check_servers(file: GatewayFile, config: GatewayConfig, open_db: Callable[[], Any], folder: Path, limits: Limits,
                  *, only: list[str] | None = None, dry_run: bool = False) -> Iterator[ServerCheck]:
    """Check (and register) each server of the file, or those named in ``only``, one after another."""
    unknown = sorted(set(only or []) - set(file.servers))
    if unknown:
        raise GatewayError(f"{file.path}: no server named {', '.join(repr(n) for n in unknown)}", code="UnknownServer",
                           status=400, hint=f"the file's servers: {', '.join(file.servers) or 'none'}")
    with open_db() as con:
        services = {s.id: s for s in Registry(con).list(service_type="mcp_server")}
    entries, problems = resolve_servers(file, services)
    loop = GatewayLoop()
    try:
        for name in file.servers:
            if only and name not in only:
                continue
            if name in problems:
                yield ServerCheck(name, False, error=problems[name].message, hint=problems[name].hint)
                continue
            entry = entries[name]
            started = loop.loop.time()
            try:
                tools = loop.call(_list_tools(entry, config), timeout_s=(entry.start_timeout_s or
                                                                         config.start_timeout_s)
                                  + (entry.call_timeout_s or config.call_timeout_s) * 2)
                with open_db() as con:
                    found = register_tools(con, name, tools, folder, limits, dry_run=dry_run)
            except A2XError as exc:
                found = ServerCheck(name, False, error=exc.message, hint=exc.hint)
            except TimeoutError:
                found = ServerCheck(name, False, error=f"server '{name}': no answer in time",
                                    hint="check that it starts by hand")
            found.connection = f"{entry.origin}: {entry.target.describe()}"
            found.seconds = round(loop.loop.time() - started, 3)
            yield found
    finally:
        loop.close([])
