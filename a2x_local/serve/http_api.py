"""The HTTP face of the server (FastAPI): the read-only API under /v1, /healthz and /readyz, /metrics, the browser
page at /, the API docs at /docs (Swagger UI's files shipped in a package: no CDN), and the MCP streamable-HTTP
endpoint at /mcp, all behind the guard (token, host, body size).

Errors are always JSON `{"error", "message", "hint"}` with a 4xx/5xx status (the OpenAPI schema says so); a crash
is logged here and the client only hears that it happened. Searches and plans stream progress as NDJSON lines when
the client asks for `Accept: application/x-ndjson` (the page does): `{"progress", "message"}` lines, then one
`{"result": ...}` or `{"error": ..., "status": ...}` line.
"""

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, TypeVar

from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response, StreamingResponse
from fastapi.staticfiles import StaticFiles
from fastapi_offline import FastAPIOffline
from pydantic import BaseModel, ConfigDict, Field, RootModel
from starlette.exceptions import HTTPException as StarletteHTTPException

from a2x_local import __version__
from a2x_local.compose import Plan
from a2x_local.errors import A2XError
from a2x_local.serve.access import CALLER, visible_plan
from a2x_local.serve.calling import Calling
from a2x_local.serve.compose_api import ComposeQuery, Planning
from a2x_local.serve.discovery import Discovery
from a2x_local.serve.errors import status_of
from a2x_local.serve.guard import Guard, mcp_host_patterns
from a2x_local.serve.progress import Report
from a2x_local.serve.views import (
    Detail,
    ErrorBody,
    Filters,
    Health,
    MethodInfo,
    NodeView,
    SearchBatchQuery,
    SearchBatchResult,
    SearchQuery,
    SearchResult,
    ServiceList,
    ServiceView,
    TreeView,
)
from a2x_local.serve.visible import VisibleJSONResponse

log = logging.getLogger("a2x_local.serve")
STATIC = Path(str(resources.files("a2x_local.serve") / "static"))
NDJSON = "application/x-ndjson"
_HTTP_CODES = {404: "NotFound", 405: "MethodNotAllowed", 406: "NotAcceptable", 415: "UnsupportedMediaType"}
_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorBody, "description": "A request outside the limits or naming what does not exist here"},
    401: {"model": ErrorBody, "description": "No or a wrong bearer token (servers started with a token)"},
    404: {"model": ErrorBody, "description": "No such service, category or tree"},
    422: {"model": ErrorBody, "description": "A body or parameter of the wrong shape (InvalidRequest)"},
    503: {"model": ErrorBody, "description": "Loading, NoModel, NoTree, EngineFailed, DatabaseBusy"},
}
_SEARCH_ERRORS = {**_ERRORS, 502: {"model": ErrorBody, "description": "ModelCallFailed, SearchFailed, ComposeFailed"},
                  504: {"model": ErrorBody, "description": "Timeout"}}
BEARER = "bearer"
T = TypeVar("T")


def _error(status: int, code: str, message: str, hint: str | None = None) -> JSONResponse:
    return JSONResponse({"error": code, "message": message, "hint": hint}, status_code=status)


def _install_error_handlers(app: FastAPI, calling: Calling | None = None) -> None:
    @app.exception_handler(A2XError)
    async def a2x_error(_: Request, exc: A2XError) -> JSONResponse:
        headers = {"Retry-After": "5"} if exc.code == "Loading" else None
        return JSONResponse(exc.to_dict(), status_code=status_of(exc), headers=headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'] if p != 'body') or 'body'}: {e['msg']}"
                             for e in exc.errors())
        if calling is not None and request.method == "POST":   # a call refused before the gateway: audited
            calling.refused_before(request.scope.get("path", ""), CALLER.get(), "", 422, "InvalidRequest",
                                   problems[:500])
        return _error(422, "InvalidRequest", problems, "GET /openapi.json (or /docs) describes every request")

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
        self.answered = discovery.state.answered

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
            self.answered.set()


def create_app(discovery: Discovery, *, token: str | None = None, loopback_only: bool = True,
               mcp: Any = None, planning: Planning | None = None, host: str | None = None,
               load_on_startup: bool = True, calling: Calling | None = None) -> Any:
    """The ASGI application: FastAPI wrapped in the guard and the timing middleware.

    ``mcp``: an `MCPServer` to serve at /mcp over streamable HTTP (stateless, JSON answers), or None.
    ``planning``: the compose stage's plans at /v1/compose (built here when not given).
    ``host``: the address the server listens on (default: `[serve]` host), accepted by /mcp's Host check.
    ``load_on_startup``: the app's start starts the server's background loading (`serve_http` starts it itself,
    once the port listens).
    ``calling``: the gateway's calls (`POST /v1/services/{id}/call`); with a gateway file, clients are served by
    the profile their token binds them to.
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
        if load_on_startup:
            discovery.state.start_loading()
        watcher = None
        if calling is not None:
            calling.gateway.loop.adopt()     # the servers' sessions live on this loop: a call crosses no thread
            if calling.enabled:
                watcher = asyncio.ensure_future(calling.watch())
        async with AsyncExitStack() as stack:
            if session_manager is not None:
                await stack.enter_async_context(session_manager.run())
            try:
                yield
            finally:
                await discovery.batcher.close()
                if calling is not None:
                    if watcher is not None:
                        watcher.cancel()
                    # Here, not after the server returns: uvicorn ends the process with the signal it caught, so
                    # the gateway's sessions must stop and its audit rows be written while the app shuts down.
                    await calling.gateway.aclose()
                    await asyncio.to_thread(calling.gateway.close)

    app = FastAPIOffline(title="a2x-local", version=__version__, lifespan=lifespan, redoc_url=None,
                         redirect_slashes=False, default_response_class=VisibleJSONResponse,
                         description="Service discovery for agents: search the registry, browse its category tree, "
                                     "list and read services, plan multi-step tasks. Read-only. MCP (streamable "
                                     "HTTP) at /mcp. Every error is `{error, message, hint}`. When the server has "
                                     "a token, send `Authorization: Bearer TOKEN` (the Authorize button).")
    _install_error_handlers(app, calling)
    _add_routes(app, discovery, planning or Planning(discovery), calling)
    app.router.routes.extend(mcp_routes)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    _declare_bearer(app, token is not None)
    callers = calling.gateway.caller if calling is not None and calling.enabled else None
    routed = _McpFirst(app, mcp_routes[0]) if mcp_routes else app
    guarded = Guard(routed, token=token, loopback_only=loopback_only, max_body_bytes=discovery.config.max_body_bytes,
                    callers=callers, refused=calling.refused_before if calling is not None else None)
    return Timing(guarded, discovery)


class _McpFirst:
    """ASGI: a request for /mcp goes straight to the MCP transport (which answers its own errors), past FastAPI's
    middleware and the walk through every API route: a gateway call through /mcp is an agent's hot path, and that
    walk cost it about a tenth of the server's time per request (profiled). The rest goes to the API."""

    def __init__(self, api: Any, route: Any) -> None:
        self.api = api
        self.route = route

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope.get("path") == self.route.path:
            scope["route"] = self.route      # the metrics' label, as the router would set it
            await self.route.app(scope, receive, send)
            return
        await self.api(scope, receive, send)


def _declare_bearer(app: FastAPI, required: bool) -> None:
    """The bearer scheme in the OpenAPI schema: on every guarded operation (all but the page, health and docs)."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = build()
            schema.setdefault("components", {})["securitySchemes"] = {BEARER: {
                "type": "http", "scheme": "bearer",
                "description": "The server's token (--token or $A2X_SERVE_TOKEN)" + (
                    "" if required else "; this server was started without one, so none is needed")}}
            for path, operations in schema["paths"].items():
                if path not in ("/healthz", "/readyz"):
                    for operation in operations.values():
                        operation["security"] = [{BEARER: []}]
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _streamed(work: Callable[[Report | None], Awaitable[BaseModel]], exclude_none: bool) -> StreamingResponse:
    """The answer as NDJSON: a progress line every second while it runs, then the result (or the error)."""
    queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()

    async def report(progress: float, total: float | None, message: str) -> None:
        await queue.put({"progress": progress, "total": total, "message": message})

    async def run() -> None:
        try:
            result = await work(report)
            await queue.put({"result": result.model_dump(mode="json", exclude_none=exclude_none)})
        except A2XError as exc:
            await queue.put({"error": exc.to_dict(), "status": status_of(exc)})
        except Exception as exc:
            log.error("a streamed answer failed", exc_info=exc)
            await queue.put({"error": {"error": "InternalError", "message": "the server failed to answer this "
                                       "request", "hint": "see the server's log"}, "status": 500})
        finally:
            await queue.put(None)

    task = asyncio.ensure_future(run())

    async def lines() -> AsyncIterator[str]:
        try:
            while (item := await queue.get()) is not None:
                yield json.dumps(item, ensure_ascii=False) + "\n"
        finally:
            if not task.done():
                task.cancel()

    return StreamingResponse(lines(), media_type=NDJSON)


async def _until_hangup(request: Request, work: Awaitable[T]) -> T | Response:
    """``work``, cancelled if the client closes its connection first (a gateway call: cancelled on the MCP server
    too); then an answer nobody reads, 499 in the metrics."""
    task = asyncio.ensure_future(work)

    async def hangup() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            continue

    watcher = asyncio.ensure_future(hangup())
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
        if not task.done():
            task.cancel()
    try:
        return await task
    except asyncio.CancelledError:
        if not watcher.done() or watcher.cancelled():   # we were cancelled ourselves, not the client gone
            raise
        return Response(status_code=499)


async def _visible_plan(work: Awaitable[Plan]) -> Plan:
    return visible_plan(await work)


def _wants_stream(request: Request) -> bool:
    return NDJSON in request.headers.get("accept", "")


class CallBody(BaseModel):
    """One call of an MCP tool through the gateway."""

    model_config = ConfigDict(extra="forbid")

    arguments: dict[str, Any] = Field(default_factory=dict, description="The tool's arguments (its inputSchema).")


class CallAnswer(RootModel[dict[str, Any]]):
    """The tool's own answer, as MCP's CallToolResult: `content`, `structuredContent`, `isError`."""


def _add_routes(app: FastAPI, discovery: Discovery, planning: Planning, calling: Calling | None = None) -> None:
    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html")

    # Browsers ask for /favicon.ico whatever the page links; the page's own icon answers it (not a 404 in the log).
    @app.get("/favicon.ico", include_in_schema=False)
    async def favicon() -> FileResponse:
        return FileResponse(STATIC / "favicon.svg", media_type="image/svg+xml",
                            headers={"Cache-Control": "max-age=86400"})

    @app.get("/healthz", response_model=Health, response_model_exclude_none=True,
                   summary="Liveness and what is served (answers at once, while loading too)")
    async def healthz() -> Health:
        health = await discovery.health()
        if calling is not None and calling.enabled:
            health.gateway = calling.describe()
        return health

    @app.get("/readyz", response_model=Health, response_model_exclude_none=True,
                   responses={503: _ERRORS[503]}, summary="Ready: registry read, model started, methods built")
    async def readyz() -> Any:
        health = await discovery.health()
        if health.status != "ok":
            return JSONResponse({"error": "Loading" if health.status == "loading" else "LoadFailed",
                                 "message": f"the server is {health.status}: " + (
                                     "; ".join(task["what"] for task in health.loading.values())
                                     or "; ".join(health.problems.values())),
                                 "hint": "GET /healthz shows the progress"}, status_code=503,
                                headers={"Retry-After": "5"})
        return health

    # HEAD for probes that only want the status (the same answer, without its body).
    app.add_api_route("/healthz", healthz, methods=["HEAD"], include_in_schema=False)
    app.add_api_route("/readyz", readyz, methods=["HEAD"], include_in_schema=False)

    @app.get("/metrics", summary="Prometheus metrics (text format)")
    async def metrics() -> Response:
        body, content_type = discovery.metrics.render()
        return Response(body, media_type=content_type)

    @app.get("/v1/methods", response_model=list[MethodInfo], response_model_exclude_none=True,
             summary="The search methods, which can run here, and why not")
    async def methods() -> list[MethodInfo]:
        return discovery.methods()

    @app.post("/v1/search", response_model=SearchResult, response_model_exclude_none=True, responses=_SEARCH_ERRORS,
              summary="Find the services for a need (one page; NDJSON progress with Accept: application/x-ndjson)")
    async def search(query: SearchQuery, request: Request) -> Any:
        if _wants_stream(request):
            discovery.check(query)
            return _streamed(lambda report: discovery.search(query, report), exclude_none=True)
        return await discovery.search(query)

    @app.get("/v1/search", response_model=SearchResult, response_model_exclude_none=True, responses=_SEARCH_ERRORS,
             summary="Find the services for a need (query string)")
    async def search_get(query: Annotated[str, Query(description="What the agent needs, in words.")],
                         method: str | None = None, k: int | None = None, mode: str | None = None,
                         type: str | None = None, source: str | None = None,
                         cursor: str | None = None, detail: Detail = "brief") -> SearchResult:
        return await discovery.search(SearchQuery(query=query, method=method, k=k, mode=mode, type=type,
                                                  source=source, cursor=cursor, detail=detail))

    @app.post("/v1/search/batch", response_model=SearchBatchResult, response_model_exclude_none=True,
              responses=_SEARCH_ERRORS, summary="Several searches in one call")
    async def search_batch(body: SearchBatchQuery) -> SearchBatchResult:
        return SearchBatchResult(results=await discovery.search_many(body.requests))

    @app.post("/v1/compose", response_model=Plan, responses=_SEARCH_ERRORS,
              summary="Plan a request that needs several services (NDJSON progress as for searches)")
    async def compose(query: ComposeQuery, request: Request) -> Any:
        if _wants_stream(request):
            planning.check(query)
            return _streamed(lambda report: _visible_plan(planning.plan(query, report)), exclude_none=False)
        return visible_plan(await planning.plan(query))

    if calling is not None:
        @app.post("/v1/services/{service_id:path}/call", response_model=CallAnswer, responses={
            **_ERRORS, 403: {"model": ErrorBody, "description": "NotCallable: this client's profile may not call it"},
            413: {"model": ErrorBody, "description": "TooLarge, ArgumentsTooLarge"},
            502: {"model": ErrorBody, "description": "ServerFailed, ToolCallFailed, ResultTooLarge: the MCP server "
                                                     "(named in the message) failed"},
            504: {"model": ErrorBody, "description": "ServerTimeout"}},
            summary="Call an MCP tool through the gateway (NDJSON progress with Accept: application/x-ndjson)")
        async def call_service(service_id: str, body: CallBody, request: Request) -> Any:
            async def work(report: Report | None = None) -> CallAnswer:
                result = await calling.call(service_id, body.arguments, via="http", report=report)
                return CallAnswer(result.model_dump(mode="json", by_alias=True, exclude_none=True))

            if _wants_stream(request):
                return _streamed(work, exclude_none=True)
            return await _until_hangup(request, work())

    @app.get("/v1/services", response_model=ServiceList, response_model_exclude_none=True, responses=_ERRORS,
             summary="The services, a page at a time, of a type or source")
    async def services(type: str | None = None, source: str | None = None,
                       limit: int | None = None, cursor: str | None = None) -> ServiceList:
        return await discovery.services(Filters(type=type, source=source), limit, cursor)

    @app.get("/v1/services/{service_id:path}", response_model=ServiceView, responses=_ERRORS,
             summary="Everything about a service")
    async def service(service_id: str) -> ServiceView:
        return await discovery.service(service_id)

    @app.get("/v1/tree", response_model=TreeView, response_model_exclude_none=True, responses=_ERRORS,
             summary="The active tree: statistics and a page of the top level")
    async def tree(limit: int | None = None, cursor: str | None = None) -> TreeView:
        return await discovery.tree(limit, cursor)

    @app.get("/v1/tree/nodes/{node_id:path}", response_model=NodeView, response_model_exclude_none=True,
             responses=_ERRORS, summary="One category of the active tree (a page of it)")
    async def node(node_id: str, limit: int | None = None, cursor: str | None = None) -> NodeView:
        return await discovery.node(node_id, limit, cursor)
