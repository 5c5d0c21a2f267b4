"""The HTTP face of the server (FastAPI): the read-only API under /v1, /healthz, /metrics, the browser page at /,
and the MCP streamable-HTTP endpoint at /mcp, all behind the guard (token, host, body size).

Errors are always JSON `{"error", "message", "hint"}` with a 4xx/5xx status; a crash is logged here and the
client only hears that it happened.
"""

import logging
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from a2x_local import __version__
from a2x_local.compose import Plan
from a2x_local.errors import A2XError
from a2x_local.serve.compose_api import ComposeQuery, Planning
from a2x_local.serve.discovery import Discovery
from a2x_local.serve.errors import status_of
from a2x_local.serve.guard import Guard, mcp_host_patterns
from a2x_local.serve.views import (
    Health,
    MethodInfo,
    NodeView,
    SearchBatchQuery,
    SearchBatchResult,
    SearchQuery,
    SearchResult,
    ServiceView,
    TreeView,
)
from a2x_local.serve.visible import VisibleJSONResponse

log = logging.getLogger("a2x_local.serve")
STATIC = Path(str(resources.files("a2x_local.serve") / "static"))
_HTTP_CODES = {404: "NotFound", 405: "MethodNotAllowed", 406: "NotAcceptable", 415: "UnsupportedMediaType"}


def _error(status: int, code: str, message: str, hint: str | None = None) -> JSONResponse:
    return JSONResponse({"error": code, "message": message, "hint": hint}, status_code=status)


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(A2XError)
    async def a2x_error(_: Request, exc: A2XError) -> JSONResponse:
        return JSONResponse(exc.to_dict(), status_code=status_of(exc))

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'] if p != 'body') or 'body'}: {e['msg']}"
                             for e in exc.errors())
        return _error(422, "InvalidRequest", problems, "GET /openapi.json describes every request")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = _HTTP_CODES.get(exc.status_code, "HTTPError")
        hint = "the API is read-only: GET, and POST for searches" if exc.status_code == 405 else None
        return _error(exc.status_code, code, str(exc.detail), hint)

    @app.exception_handler(Exception)
    async def crash(request: Request, exc: Exception) -> JSONResponse:
        log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
        return _error(500, "InternalError", "the server failed to answer this request", "see the server's log")


class Timing:
    """ASGI middleware: every request's route, status and latency into the metrics."""

    def __init__(self, app: Any, discovery: Discovery) -> None:
        self.app = app
        self.metrics = discovery.metrics

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def capture(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, capture)
        finally:
            route = scope.get("route")
            label = getattr(route, "path", None) or "unmatched"
            self.metrics.observe_request(label, status, time.perf_counter() - started)


def create_app(discovery: Discovery, *, token: str | None = None, loopback_only: bool = True,
               mcp: Any = None, planning: Planning | None = None, host: str | None = None) -> Any:
    """The ASGI application: FastAPI wrapped in the guard and the timing middleware.

    ``mcp``: an `MCPServer` to serve at /mcp over streamable HTTP (stateless, JSON answers), or None.
    ``planning``: the compose stage's plans at /v1/compose (built here when not given).
    ``host``: the address the server listens on (default: `[serve]` host), accepted by /mcp's Host check.
    """
    session_manager = None
    mcp_routes: list[Any] = []
    if mcp is not None:
        from mcp.server.transport_security import TransportSecuritySettings

        # On loopback the SDK checks Host and Origin too, accepting the address bound (``host``); beyond loopback
        # the token is the protection.
        hosts, origins = mcp_host_patterns(host or discovery.config.host)
        security = (TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts,
                                              allowed_origins=origins) if loopback_only else
                    TransportSecuritySettings(enable_dns_rebinding_protection=False))
        mcp_app = mcp.streamable_http_app(streamable_http_path="/mcp", stateless_http=True, json_response=True,
                                          max_request_body_size=discovery.config.max_body_bytes,
                                          transport_security=security)
        session_manager = mcp.session_manager
        mcp_routes = list(mcp_app.routes)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            if session_manager is not None:
                await stack.enter_async_context(session_manager.run())
            try:
                yield
            finally:
                await discovery.batcher.close()

    app = FastAPI(title="a2x-local", version=__version__, lifespan=lifespan, docs_url=None, redoc_url=None,
                  default_response_class=VisibleJSONResponse,
                  description="Service discovery for agents: search the registry, browse its category tree, read "
                              "a service. Read-only. MCP (streamable HTTP) at /mcp.")
    _install_error_handlers(app)
    _add_routes(app, discovery, planning or Planning(discovery))
    app.router.routes.extend(mcp_routes)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    guarded = Guard(app, token=token, loopback_only=loopback_only, max_body_bytes=discovery.config.max_body_bytes)
    return Timing(guarded, discovery)


def _add_routes(app: FastAPI, discovery: Discovery, planning: Planning) -> None:
    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html")

    @app.get("/healthz", response_model=Health, summary="Liveness and what is being served")
    async def healthz() -> Health:
        return await discovery.health()

    @app.get("/metrics", summary="Prometheus metrics (text format)")
    async def metrics() -> Response:
        body, content_type = discovery.metrics.render()
        return Response(body, media_type=content_type)

    @app.get("/v1/methods", response_model=list[MethodInfo], summary="The search methods and which can run")
    async def methods() -> list[MethodInfo]:
        return discovery.methods()

    @app.post("/v1/search", response_model=SearchResult, summary="Find the services for a need")
    async def search(query: SearchQuery) -> SearchResult:
        return await discovery.search(query)

    @app.get("/v1/search", response_model=SearchResult, summary="Find the services for a need (query string)")
    async def search_get(query: Annotated[str, Query(description="What the agent needs, in words.")],
                         method: str | None = None, k: int | None = None, mode: str | None = None,
                         trace: bool = False) -> SearchResult:
        return await discovery.search(SearchQuery(query=query, method=method, k=k, mode=mode, trace=trace))

    @app.post("/v1/search/batch", response_model=SearchBatchResult, summary="Several searches in one call")
    async def search_batch(body: SearchBatchQuery) -> SearchBatchResult:
        return SearchBatchResult(results=await discovery.search_many(body.requests))

    @app.post("/v1/compose", response_model=Plan, summary="Plan a request that needs several services")
    async def compose(query: ComposeQuery) -> Plan:
        return await planning.plan(query)

    @app.get("/v1/services/{service_id:path}", response_model=ServiceView, summary="Everything about a service")
    async def service(service_id: str) -> ServiceView:
        return await discovery.service(service_id)

    @app.get("/v1/tree", response_model=TreeView, summary="The active tree: statistics and top categories")
    async def tree() -> TreeView:
        return await discovery.tree()

    @app.get("/v1/tree/nodes/{node_id:path}", response_model=NodeView, summary="One category of the active tree")
    async def node(node_id: str) -> NodeView:
        return await discovery.node(node_id)
