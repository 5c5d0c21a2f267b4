"""Putting a server together and running it: over HTTP (API, page, MCP at /mcp) or over stdio (MCP only).

`build_server` wires the parts once, without loading anything slow: the state (whose background loading reads the
registry, starts the engine behind shared rounds and builds the preloaded methods), the batcher, the operations
(discovery; the compose stage's plans), the MCP server and the HTTP app. The server answers `initialize`,
`tools/list`, /healthz and the page at once; what needs the registry or the model waits for it.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from a2x_local.errors import UserError
from a2x_local.gateway import AuditLog, Gateway, GatewayConfig, gateway_path
from a2x_local.llm import Engine, EngineOptions, engine_settings, make_engine
from a2x_local.serve.batching import SearchBatcher
from a2x_local.serve.calling import Calling, StdioClient
from a2x_local.serve.compose_api import Planning
from a2x_local.serve.config import ServeConfig, check_methods
from a2x_local.serve.discovery import Discovery
from a2x_local.serve.guard import check_bind, is_loopback
from a2x_local.serve.rounds import SharedRounds
from a2x_local.serve.state import ServerState
from a2x_local.settings import Settings

log = logging.getLogger("a2x_local.serve")
STDIO_CLAIM_WAIT_S = 2.0
STDIO_HANDSHAKE_WAIT_S = 5.0
# Over HTTP the loading starts once the first request is answered (a client polling /healthz), at the latest this
# long after the port listens: the model's imports hold the interpreter for seconds and would delay that answer.
HTTP_FIRST_ANSWER_WAIT_S = 2.0
# The token a stdio client gives in the environment it starts `serve --stdio` with (its profile's token).
CLIENT_TOKEN_VARIABLE = "A2X_CLIENT_TOKEN"


@dataclass(frozen=True)
class ServeOptions:
    """What `a2x-local serve` was asked for; None = the `[serve]` configuration."""

    host: str | None = None
    port: int | None = None
    token: str | None = None
    insecure: bool = False
    engine: EngineOptions | None = None   # None: no model (retrieval methods only)
    gateway: Path | None = None           # the gateway file (None: [gateway] file, else $A2X_HOME/gateway.toml)


@dataclass
class Server:
    """The parts of one running server."""

    state: ServerState
    discovery: Discovery
    planning: Planning
    mcp: Any
    calling: Calling

    def start_loading(self) -> None:
        self.state.start_loading()

    def close(self) -> None:
        self.calling.gateway.close()     # the servers' sessions stopped, the audit rows written
        self.planning.close()
        self.state.close()


def wants_engine(options: EngineOptions | None) -> bool:
    """A model is started only when the command names one (or an engine or server URL)."""
    return options is not None and any(value is not None for value in options.model_dump().values())


def build_server(settings: Settings, config: ServeConfig, *, engine: Engine | Callable[[], Engine] | None = None,
                 engine_options: EngineOptions | None = None, gateway_file: Path | None = None) -> Server:
    """A server ready to answer (its loading not started: `Server.start_loading`, or the HTTP app's start, does
    that). ``engine`` (tests: an engine, or a function making one) or ``engine_options`` (the CLI) give the LLM
    methods their one engine; a model that does not resolve (no such alias or folder) fails here, before anything
    listens (resolving loads nothing; a folder's files are checked as the engine loads, an error then answers
    `EngineFailed`). The gateway file (``gateway_file``, else the configured one) is read and checked here too:
    a server never starts with a gateway file it cannot follow. The methods it offers are those registered: the
    process's composition root (`a2x_local.components.register_components`, which `a2x-local serve` runs first)
    adds compose's and the plug-ins'."""
    from a2x_local.serve.mcp_tools import build_mcp
    from a2x_local.serve.metrics import Metrics

    check_methods(settings, config)   # the methods are all registered by now: a misspelt one is refused at start
    state: ServerState | None = None
    # The lambdas read `state` and `discovery` when /metrics is scraped, after both are set below.
    metrics = Metrics(usage=lambda: state.engine.usage if state is not None and state.engine is not None else None,
                      state=lambda: discovery.state_numbers())
    source: Callable[[], Engine] | None = None
    if isinstance(engine, Engine):
        source = lambda: engine  # noqa: E731
    elif engine is not None:
        source = engine
    elif wants_engine(engine_options):
        engine_settings(settings, engine_options)   # an unknown model fails now; its files are checked as it loads
        source = lambda: make_engine(settings, engine_options)  # noqa: E731

    def shared(inner: Engine) -> SharedRounds:
        return SharedRounds(inner, window_s=config.engine_window_ms / 1000, max_prompts=config.engine_max_prompts,
                            on_round=metrics.engine_batch.observe)

    state = ServerState(settings, config, source, wrap_engine=shared)
    state.start()
    batcher = SearchBatcher(window_s=config.batch_window_ms / 1000, max_batch=config.max_batch,
                            concurrency=config.llm_batch_concurrency,
                            on_batch=lambda method, size: metrics.search_batch.labels(method).observe(size))
    discovery = Discovery(state, batcher, metrics)
    planning = Planning(discovery)
    calling = Calling(discovery, _gateway(settings, state, gateway_file), set())
    return Server(state, discovery, planning, build_mcp(discovery, planning, calling), calling)


def _gateway(settings: Settings, state: ServerState, given: Path | None) -> Gateway:
    """The gateway, its audit written into the registry under the state's one-connection lock."""
    config = GatewayConfig.from_settings(settings)
    audit = AuditLog(state.db_path, config, database=state.database(), written=state.own_write,
                     lock_timeout_s=state.config.reload_lock_wait_s)
    return Gateway(config, gateway_path(settings, config, given), audit=audit)


def serve_http(settings: Settings, options: ServeOptions) -> None:
    """Serve the HTTP API, the page and MCP at /mcp until interrupted (SIGINT/SIGTERM stop it cleanly)."""
    config = ServeConfig.from_settings(settings, host=options.host, port=options.port)
    check_bind(config.host, options.token, options.insecure)
    import uvicorn

    from a2x_local.serve.http_api import create_app

    _log_to_stderr()
    server = build_server(settings, config, engine_options=options.engine, gateway_file=options.gateway)
    try:
        app = create_app(server.discovery, token=options.token, loopback_only=is_loopback(config.host),
                         mcp=server.mcp, planning=server.planning, host=config.host, load_on_startup=False,
                         calling=server.calling)
        where = f"http://{config.host}:{config.port}"
        log.info("a2x-local serving %s: page %s/ , API %s/v1 , MCP %s/mcp (loading in the background: %s/healthz)",
                 settings.db_path, where, where, where, where)
        listener = _listener(uvicorn.Config(app, host=config.host, port=config.port, log_level="info",
                                            access_log=False, timeout_graceful_shutdown=10))
        # The background loading starts once the port listens and its first request is answered (or a moment
        # after): its imports and index builds would otherwise slow the server's own start and first answer.
        threading.Thread(target=_load_when_listening, args=(listener, server), name="a2x-start", daemon=True).start()
        listener.run()
    finally:
        server.close()
    exit_past_loading_threads()


def _listener(config: Any) -> Any:
    """uvicorn's server, except that the SIGINT or SIGTERM it shut down on gracefully is not raised again after:
    uvicorn re-raises it so that the process dies of it (exit status -15 for SIGTERM, an interrupted command for
    Ctrl-C), where a server that stopped cleanly, its work closed, exits 0 (docs/serve.md)."""
    import uvicorn

    class Listener(uvicorn.Server):
        @contextmanager
        def capture_signals(self) -> Iterator[None]:
            with super().capture_signals():
                try:
                    yield
                finally:
                    self._captured_signals.clear()

    return Listener(config)


def serve_stdio(settings: Settings, options: ServeOptions) -> None:
    """Serve MCP over this process's stdin/stdout (a desktop or IDE agent starts it as a subprocess)."""
    import anyio

    from a2x_local.serve.stdio import run_stdio

    config = ServeConfig.from_settings(settings, host=options.host, port=options.port)
    _log_to_stderr()
    with stdout_to_stderr():  # library chatter must never reach the protocol channel
        server = build_server(settings, config, engine_options=options.engine, gateway_file=options.gateway)
    # The one client of this process: its profile comes from the token in $A2X_CLIENT_TOKEN (none: the default),
    # found again for every request (a changed gateway file applies at once); refused now if no profile knows it.
    gateway = server.calling.gateway
    token = os.environ.get(CLIENT_TOKEN_VARIABLE) or None
    if gateway.enabled and gateway.caller(token, anonymous="stdio") is None:
        server.close()
        raise UserError(f"${CLIENT_TOKEN_VARIABLE} holds a token that no profile of the gateway file is bound to",
                        hint="set it to a token of a profile ([profiles.NAME] tokens), or unset it for the default "
                             "profile", code="Unauthorized")

    # The background loading (its imports hold the interpreter for seconds at a time) starts once the client's
    # handshake is done, so `initialize` and `tools/list` are answered first; at the latest after a few seconds.
    server.mcp.middleware.append(_LoadAfterHandshake(server))
    if gateway.enabled:
        server.mcp.middleware.insert(0, StdioClient(server.calling, token))

    async def run() -> None:
        gateway.loop.adopt()     # the servers' sessions live on this loop: a call crosses no thread
        try:
            async with anyio.create_task_group() as tasks:

                async def serve() -> None:
                    await run_stdio(server.mcp)   # the SDK's transport, with lines it cannot take answered (stdio.py)
                    tasks.cancel_scope.cancel()

                tasks.start_soon(serve)
                if gateway.enabled:
                    tasks.start_soon(server.calling.watch)
                # The transport points descriptor 1 at stderr while it serves (the protocol goes through a
                # duplicate). The engine's start-up redirects descriptor 1 too, so it may begin only once that has
                # happened.
                await _until_stdout_claimed()
                await anyio.sleep(STDIO_HANDSHAKE_WAIT_S)
                server.start_loading()
        finally:
            with anyio.move_on_after(30, shield=True):
                await gateway.aclose()      # on this loop, before it ends (the processes stopped)

    try:
        anyio.run(run)
    finally:
        server.close()
    exit_past_loading_threads()


def exit_past_loading_threads() -> None:
    """End a cleanly stopped server at once (exit status 0) when its background loading is still under way.

    Why not return: the loading threads may be inside native code (torch's or vLLM's imports and static
    initialisers, FAISS, DuckDB) when the client goes away. Python's shutdown ends such daemon threads with
    `pthread_exit`, whose unwinding through C++ frames that catch everything aborts the process: "terminate called
    after throwing an instance of ''", "FATAL: exception not rethrown", exit status 134 after every stdio session
    closed during the load (issue 33, item 11). Everything the server owns is closed by now (the gateway's audit
    written, the engine stopped, the logs flushed), and what the loading threads were doing is either read-only or
    written to a temporary folder and renamed into place (an index), so skipping the interpreter's shutdown loses
    nothing. With no such thread alive, the ordinary return."""
    busy = [thread.name for thread in threading.enumerate()
            if thread is not threading.main_thread() and thread.daemon and thread.is_alive()]
    if not busy:
        return
    log.info("stopped (background work left unfinished: %s)", ", ".join(sorted(set(busy))))
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):   # a client that closed its end of the pipe
            continue
    os._exit(0)


class _LoadAfterHandshake:
    """MCP middleware: starts the server's background loading after the first message that is not `initialize`
    (the client's `notifications/initialized`, or its first request)."""

    def __init__(self, server: Server) -> None:
        self.server = server

    async def __call__(self, ctx: Any, call_next: Callable[[Any], Any]) -> Any:
        result = await call_next(ctx)
        if ctx.method != "initialize":
            self.server.start_loading()
        return result


def _load_when_listening(listener: Any, server: Server) -> None:
    while not listener.started and not listener.should_exit:
        time.sleep(0.01)
    if listener.started:
        server.state.answered.wait(HTTP_FIRST_ANSWER_WAIT_S)
        if not listener.should_exit:
            server.start_loading()


async def _until_stdout_claimed() -> None:
    import anyio

    deadline = time.monotonic() + STDIO_CLAIM_WAIT_S
    while time.monotonic() < deadline:
        await anyio.sleep(0.005)
        try:
            out, err = os.fstat(1), os.fstat(2)
        except OSError:
            return
        if (out.st_dev, out.st_ino) == (err.st_dev, err.st_ino):
            return
    log.warning("the MCP transport did not take over stdout; loading anyway")


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
    for logger in (log, logging.getLogger("a2x_local.gateway")):
        if not logger.handlers:
            handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
            logger.addHandler(handler)
            logger.setLevel(logging.INFO)
            logger.propagate = False  # the MCP SDK puts a handler on the root logger too: say each thing once
