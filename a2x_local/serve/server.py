"""Putting a server together and running it: over HTTP (API, page, MCP at /mcp) or over stdio (MCP only).

`build_server` wires the parts once: the engine (when a model is asked for) behind shared rounds, the state, the
batcher, the operations (discovery; the compose stage's plans), the MCP server and the HTTP app.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from a2x_local.compose import COMPOSE_SPEC
from a2x_local.llm import Engine, EngineOptions, make_engine
from a2x_local.search import register_method
from a2x_local.serve.batching import SearchBatcher
from a2x_local.serve.compose_api import Planning
from a2x_local.serve.config import ServeConfig
from a2x_local.serve.discovery import Discovery
from a2x_local.serve.guard import check_bind, is_loopback
from a2x_local.serve.rounds import SharedRounds
from a2x_local.serve.state import ServerState
from a2x_local.settings import Settings

log = logging.getLogger("a2x_local.serve")


@dataclass(frozen=True)
class ServeOptions:
    """What `a2x-local serve` was asked for; None = the `[serve]` configuration."""

    host: str | None = None
    port: int | None = None
    token: str | None = None
    insecure: bool = False
    engine: EngineOptions | None = None   # None: no model (retrieval methods only)


@dataclass
class Server:
    """The parts of one running server."""

    state: ServerState
    discovery: Discovery
    planning: Planning
    mcp: Any

    def close(self) -> None:
        self.planning.close()
        self.state.close()


def wants_engine(options: EngineOptions | None) -> bool:
    """A model is started only when the command names one (or an engine or server URL)."""
    return options is not None and any(value is not None for value in options.model_dump().values())


def build_server(settings: Settings, config: ServeConfig, *, engine: Engine | None = None,
                 engine_options: EngineOptions | None = None) -> Server:
    """A ready server: registry read, preloaded methods built; ``engine`` (tests) or ``engine_options`` (the CLI)
    gives the LLM methods their one engine."""
    from a2x_local.serve.mcp_tools import build_mcp
    from a2x_local.serve.metrics import Metrics

    # A composition root: the search stage knows only its own methods; compose's joins them here.
    register_method(COMPOSE_SPEC, replace=True)
    # The lambdas read `shared` and `discovery` when /metrics is scraped, after both are set below.
    metrics = Metrics(usage=lambda: shared.usage if shared is not None else None,
                      state=lambda: discovery.state_numbers())
    if engine is None and wants_engine(engine_options):
        engine = make_engine(settings, engine_options)
    shared = None
    if engine is not None:
        shared = SharedRounds(engine, window_s=config.engine_window_ms / 1000, max_prompts=config.engine_max_prompts,
                              on_round=metrics.engine_batch.observe)
    state = ServerState(settings, config, shared)
    try:
        state.start()
    except BaseException:
        state.close()
        raise
    batcher = SearchBatcher(window_s=config.batch_window_ms / 1000, max_batch=config.max_batch,
                            concurrency=config.llm_batch_concurrency,
                            on_batch=lambda method, size: metrics.search_batch.labels(method).observe(size))
    discovery = Discovery(state, batcher, metrics)
    planning = Planning(discovery)
    return Server(state, discovery, planning, build_mcp(discovery, planning))


def serve_http(settings: Settings, options: ServeOptions) -> None:
    """Serve the HTTP API, the page and MCP at /mcp until interrupted (SIGINT/SIGTERM stop it cleanly)."""
    config = ServeConfig.from_settings(settings, host=options.host, port=options.port)
    check_bind(config.host, options.token, options.insecure)
    import uvicorn

    from a2x_local.serve.http_api import create_app

    _log_to_stderr()
    server = build_server(settings, config, engine_options=options.engine)
    try:
        app = create_app(server.discovery, token=options.token, loopback_only=is_loopback(config.host),
                         mcp=server.mcp, planning=server.planning, host=config.host)
        where = f"http://{config.host}:{config.port}"
        log.info("a2x-local serving %s: page %s/ , API %s/v1 , MCP %s/mcp", settings.db_path, where, where, where)
        uvicorn.Server(uvicorn.Config(app, host=config.host, port=config.port, log_level="info",
                                      access_log=False, timeout_graceful_shutdown=10)).run()
    finally:
        server.close()


def serve_stdio(settings: Settings, options: ServeOptions) -> None:
    """Serve MCP over this process's stdin/stdout (a desktop or IDE agent starts it as a subprocess)."""
    import anyio

    from a2x_local.serve.stdio import run_stdio

    config = ServeConfig.from_settings(settings, host=options.host, port=options.port)
    _log_to_stderr()
    with stdout_to_stderr():  # engine start-up and library chatter must never reach the protocol channel
        server = build_server(settings, config, engine_options=options.engine)
    try:
        anyio.run(run_stdio, server.mcp)   # the SDK's transport, with lines it cannot take answered (stdio.py)
    finally:
        server.close()


@contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Point file descriptor 1 at stderr for a block (C libraries write to the descriptor, not sys.stdout)."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _log_to_stderr() -> None:
    if not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False  # the MCP SDK puts a handler on the root logger too: say each thing once
