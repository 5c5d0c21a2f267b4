"""`a2x-local serve`: the long-running server for agents (MCP over stdio or HTTP, HTTP API, browser page)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from a2x_local.cli.options import DbOption, config_flag, settings_for, with_engine_options
from a2x_local.extras import check
from a2x_local.llm import EngineOptions
from a2x_local.serve import ServeOptions, serve_http, serve_stdio
from a2x_local.settings import table_models

# This module's commands; the composition root (cli/app.py) adds them to the application.
commands = typer.Typer()

_SERVE = table_models()["serve"]   # --port takes its field's bounds


@commands.command("serve")
@with_engine_options
def serve_command(
    ctx: typer.Context,
    stdio: Annotated[bool, typer.Option("--stdio", help="Speak MCP over stdin/stdout instead of HTTP (for a desktop "
                                        "or IDE agent that starts this command itself).")] = False,
    host: Annotated[str | None, typer.Option("--host", show_default=False,
                                             help="Address to bind (default: 127.0.0.1 from \\[serve]). Any other "
                                                  "address needs --token or --insecure.")] = None,
    port: config_flag(_SERVE, "port", "--port", show_default=False,
                      help="TCP port (default: 8765 from \\[serve] port).") = None,
    token: Annotated[str | None, typer.Option("--token", envvar="A2X_SERVE_TOKEN", show_default=False,
                                              help="Require 'Authorization: Bearer TOKEN' on the API and /mcp "
                                                   "(better: set $A2X_SERVE_TOKEN, so it is not on the command "
                                                   "line).")] = None,
    insecure: Annotated[bool, typer.Option("--insecure", help="Allow a non-loopback --host without a token (only "
                                           "on a network you trust).")] = False,
    preset: Annotated[str | None, typer.Option("--preset", show_default=False,
                                               help="Settings of the LLM methods' token levers: default | published"
                                                    " | lean (default: \\[search] preset; lean for engines billed "
                                                    "per prompt token).")] = None,
    gateway: Annotated[Path | None, typer.Option("--gateway", show_default=False,
                                                 help="Gateway file: the MCP servers whose tools clients may call, "
                                                      "and the profiles (default: \\[gateway] file, else "
                                                      "$A2X_HOME/gateway.toml when it exists).")] = None,
    db: DbOption = None,
    engine_options: EngineOptions = None,  # type: ignore[assignment]  (filled by with_engine_options)
) -> None:
    """Serve agents: MCP (streamable HTTP at /mcp, or --stdio), the HTTP API (/v1), a browser page (/).

    Without --model only the retrieval methods run; with it, the LLM methods share one engine.

    Concurrent searches share engine rounds. A newly activated tree is served from the next request on.

    With a gateway file, agents also call the registered MCP servers' tools through it (call_service,
    activate_services, POST /v1/services/ID/call), as its profiles allow (docs/gateway.md).

    Example: a2x-local serve --port 8765 --model qwen2.5-7b   (then open http://127.0.0.1:8765/)
    """
    check("fastapi", "fastapi_offline", "uvicorn", "mcp", "jsonschema", "prometheus_client", feature="a2x-local serve")
    settings = settings_for(ctx, db)
    if preset is not None:
        known = list(settings.config.get("search_presets", {}))
        if preset not in known:
            raise typer.BadParameter(f"unknown preset '{preset}'; choose one of: {', '.join(known)}",
                                     param_hint="--preset")
        settings = settings.with_overrides("search", preset=preset)
    options = ServeOptions(host=host, port=port, token=token or None, insecure=insecure, engine=engine_options,
                           gateway=gateway)
    if stdio:
        serve_stdio(settings, options)
    else:
        serve_http(settings, options)
