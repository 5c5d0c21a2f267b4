"""The MCP face of the server (official SDK, 2.x): tools for agents, and the tree as resources.

The same `MCPServer` runs over stdio (`a2x-local serve --stdio`, for desktop and IDE agents) and over streamable
HTTP at /mcp next to the HTTP API. The tool list is what every agent pays for before its first question, so the
descriptions are short and say when to call which; the tools publish no output schema (their structured content
is the HTTP API's JSON, documented in docs/serve.md). Answers are compact text for the model (`compact.py`) plus
that structured content; a call that takes more than a second sends progress notifications when the client gave
a progress token.
"""

# No `from __future__ import annotations`: the SDK reads the tools' parameter annotations at run time, and they
# use this server's limits from the enclosing function.

import functools
import json
from collections.abc import Callable
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError
from mcp.server.subscriptions import InMemorySubscriptionBus
from mcp.shared.subscriptions import ToolsListChanged
from mcp.types import CallToolResult, TextContent, Tool, ToolAnnotations
from pydantic import Field

from a2x_local import __version__
from a2x_local.compose import COMPOSE_SPEC
from a2x_local.errors import A2XError
from a2x_local.registry import SERVICE_TYPES
from a2x_local.search import method_spec
from a2x_local.serve import compact
from a2x_local.serve.access import visible_plan
from a2x_local.serve.calling import Calling
from a2x_local.serve.compose_api import ComposeQuery, Planning, brief_plan
from a2x_local.serve.discovery import Discovery
from a2x_local.serve.views import Detail, Filters, SearchQuery
from a2x_local.serve.visible import visible

INSTRUCTIONS = """\
Finds services (MCP tools and servers, A2A agents, skills, APIs) in an offline catalogue. Call search_services \
with the need in plain words, then get_service on a hit's id for how to call it. compose_plan plans a task that \
needs several services; browse_category and list_services look around."""

READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
# A call runs another server's tool: it may change things, and what it does is that tool's business.
CALLS = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=True)
# Activating changes only this client's own tools/list.
ACTIVATES = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
TYPES = " | ".join(SERVICE_TYPES)
# The server's own tools: an activated tool of the same name is refused (it would shadow one of these).
OWN_TOOLS = frozenset({"search_services", "compose_plan", "get_service", "browse_category", "list_services",
                       "call_service", "activate_services", "deactivate_services"})
CURSOR = "next_cursor of the previous answer, for the next page."


def methods_line(names: list[str], default: str, plan: str | None = None) -> str:
    """The search methods this server runs, grouped by what a query costs (from their specs); ``plan``, the
    planning method, last with what it answers (its plan itself comes from compose_plan)."""
    groups: dict[str, list[str]] = {}
    for name in names:
        if name != plan:
            groups.setdefault(method_spec(name).cost, []).append(name + (" (default)" if name == default else ""))
    words = {"retrieval": "retrieval, ranked, milliseconds", "llm": "a few LLM prompts per query, seconds",
             "llm-heavy": "one very long LLM prompt per query (the whole catalogue): slow and costly"}
    line = "; ".join(f"{', '.join(members)}: {words[cost]}" for cost, members in groups.items())
    if plan in names:
        line += f"; {plan}: the services of a multi-step plan as one ranking (compose_plan gives the plan)"
    return line


def _answer(text: str, structured: dict[str, Any]) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=structured)


def _dumped(view: Any) -> dict[str, Any]:
    return view.model_dump(mode="json", exclude_none=True)


class _Refused(Exception):
    """An operation's user-facing error, already worded as the tool's error answer."""

    def __init__(self, result: CallToolResult) -> None:
        super().__init__(result.content[0].text)
        self.result = result


async def _run(work: Any) -> Any:
    """The operation's answer; a user-facing error becomes an error answer the model can read and act on."""
    try:
        return visible(await work)    # bidi controls in names shown as <U+202E> (visible.py)
    except A2XError as exc:
        # The code leads, as the HTTP API's "error" field does, so an agent can tell errors apart without parsing.
        text = f"{exc.code}: {exc.message}" + (f" (hint: {exc.hint})" if exc.hint else "")
        raise _Refused(CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)) from exc


def _tool(function: Callable[..., Any]) -> Callable[..., Any]:
    """A tool body whose refusals are returned as error answers in the server's own words (the SDK would prefix
    raised errors with "Error executing tool ...")."""

    @functools.wraps(function)
    async def answered(*args: Any, **kwargs: Any) -> CallToolResult:
        try:
            return await function(*args, **kwargs)
        except _Refused as refused:
            return refused.result

    return answered


def _progress(ctx: Context) -> Callable[..., Any]:
    return ctx.report_progress


def build_mcp(discovery: Discovery, planning: Planning, calling: Calling | None = None) -> MCPServer:
    """An MCP server answering from ``discovery`` and ``planning`` (the tools are closures over them); with a
    gateway (``calling``), also the tools that call services and the dynamic mode."""
    config = discovery.config
    state = discovery.state
    search_names = state.offered()
    step_names = state.offered(steps=True)
    # WARNING: the SDK configures the root logger at this level, and INFO would log every HTTP request made.
    # The subscriptions/listen streams' bus, kept to tell them when a client's activated tools change unasked.
    bus = InMemorySubscriptionBus()
    server = MCPServer("a2x-local", title="a2x-local service discovery", instructions=INSTRUCTIONS,
                       version=__version__, log_level="WARNING", subscriptions=bus)
    text_limit = {"maxLength": config.max_query_chars}

    @server.tool(name="search_services", title="Search services", annotations=READ_ONLY, description=(
        "Find services for one task described in plain words (e.g. \"convert 100 USD to EUR\"), not by name. "
        "Answers a page of hits (name, type, id, score, category, summary); call get_service on an id for how to "
        "call it. For a task of several steps use compose_plan."))
    @_tool
    async def search_services(
        query: Annotated[str, Field(description="The need, in words.", json_schema_extra=text_limit)],
        ctx: Context,
        method: Annotated[str | None, Field(description="Search method: " + methods_line(
            search_names, config.default_method, COMPOSE_SPEC.name) + ".")] = None,
        k: Annotated[int | None, Field(description=f"Hits per page, 1-{config.max_k}.")] = None,
        mode: Annotated[str | None, Field(description="LLM methods: get_all | get_important | "
                                                      "get_one.")] = None,
        type: Annotated[str | None, Field(description=f"Only this type: {TYPES}.")] = None,
        source: Annotated[str | None, Field(description="Only services whose source file path contains this.")]
        = None,
        cursor: Annotated[str | None, Field(description=CURSOR)] = None,
        detail: Annotated[Detail, Field(description="full adds the cost and trace.")] = "brief",
    ) -> CallToolResult:
        query_ = SearchQuery(query=query, method=method, k=k, mode=mode, type=type, source=source, cursor=cursor,
                             detail=detail)
        result = await _run(discovery.search(query_, _progress(ctx)))
        return _answer(compact.search_text(result), _dumped(result))

    @server.tool(name="compose_plan", title="Plan a multi-step task", annotations=READ_ONLY, description=(
        "Plan a task that needs several services, e.g. \"change my flight to Friday, then email the new itinerary "
        "to my team\": it is split into steps, each step is searched, and one service is chosen per step, with "
        "alternatives, dependencies and the order to run them in. A step with low_confidence true may have the wrong "
        "service: ask the user before running it."))
    @_tool
    async def compose_plan(
        request: Annotated[str, Field(description="The whole task, in words.", json_schema_extra=text_limit)],
        ctx: Context,
        method: Annotated[str | None, Field(description=f"Step search method: {', '.join(step_names)}.")] = None,
        k: Annotated[int | None, Field(description="Candidates per step.")] = None,
        mode: Annotated[str | None, Field(description="LLM step methods: get_all | get_important | get_one.")]
        = None,
        detail: Annotated[Detail, Field(description="full adds scores, cost and the re-decomposition report.")]
        = "brief",
    ) -> CallToolResult:
        plan = visible_plan(await _run(planning.plan(ComposeQuery(request=request, method=method, k=k, mode=mode),
                                                     _progress(ctx))))
        structured = brief_plan(plan, detail)
        return _answer(compact.plan_text(structured), structured)

    @server.tool(name="get_service", title="Get a service", annotations=READ_ONLY, description=(
        "Everything stored about one service, by the id a search or listing gave: description, metadata (an MCP "
        "tool's input schema, an A2A agent's card and endpoints, a skill's file), source, and its categories."))
    @_tool
    async def get_service(
        service_id: Annotated[str, Field(description="The service's id.", json_schema_extra={"maxLength": 1000})],
    ) -> CallToolResult:
        view = await _run(discovery.service(service_id))
        return _answer(compact.service_text(view), _dumped(view))

    @server.tool(name="browse_category", title="Browse a category", annotations=READ_ONLY, description=(
        "One category of the catalogue's tree: its sub-categories (with how many services each holds) and the "
        "services filed in it, a page at a time. Start at \"root\" and pass a child's id to go deeper."))
    @_tool
    async def browse_category(
        node_id: Annotated[str, Field(description='Category id; "root" for the top.',
                                      json_schema_extra={"maxLength": 1000})] = "root",
        limit: Annotated[int | None, Field(description=f"Entries per page, 1-{config.max_page}.")] = None,
        cursor: Annotated[str | None, Field(description=CURSOR)] = None,
    ) -> CallToolResult:
        view = await _run(discovery.node(node_id, limit, cursor))
        return _answer(compact.node_text(view), _dumped(view))

    @server.tool(name="list_services", title="List services", annotations=READ_ONLY, description=(
        "The catalogue's services in id order, a page at a time, optionally of one type or source."))
    @_tool
    async def list_services(
        type: Annotated[str | None, Field(description=f"Only this type: {TYPES}.")] = None,
        source: Annotated[str | None, Field(description="Only services whose source file path contains this.")]
        = None,
        limit: Annotated[int | None, Field(description=f"Services per page, 1-{config.max_page}.")] = None,
        cursor: Annotated[str | None, Field(description=CURSOR)] = None,
    ) -> CallToolResult:
        listing = await _run(discovery.services(Filters(type=type, source=source), limit, cursor))
        return _answer(compact.services_text(listing), _dumped(listing))

    @server.resource("a2x://tree", name="tree", title="Category tree",
                     description="The active category tree: its statistics and the first page of the top level.",
                     mime_type="application/json")
    async def tree_resource() -> str:
        return await _resource(discovery.tree())

    @server.resource("a2x://tree/nodes/{+node_id}", name="tree-node", title="Category",
                     description="One category of the active tree (the first page, as browse_category answers).",
                     mime_type="application/json")
    async def node_resource(node_id: str) -> str:
        return await _resource(discovery.node(node_id))

    if calling is not None and calling.enabled:
        add_gateway_tools(server, calling)
        calling.notifiers.append(lambda: bus.publish(ToolsListChanged()))
    return server


def _refused(exc: A2XError) -> CallToolResult:
    text = f"{exc.code}: {exc.message}" + (f" (hint: {exc.hint})" if exc.hint else "")
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


def add_gateway_tools(server: MCPServer, calling: Calling) -> None:
    """call_service, activate_services and deactivate_services, and the middleware that lists this client's
    activated tools in tools/list and routes their calls through the gateway."""
    calling.reserved |= OWN_TOOLS

    @server.tool(name="call_service", title="Call a service", annotations=CALLS, description=(
        "Run an MCP tool found by search_services (type mcp_tool): service_id from a hit, arguments as its "
        "inputSchema (get_service) says. Only tools the registry owner allows this client can run; the answer is "
        "the tool's own."))
    async def call_service(
        service_id: Annotated[str, Field(description="The tool's service id (SERVER/TOOL).",
                                         json_schema_extra={"maxLength": 1000})],
        ctx: Context,
        arguments: Annotated[dict[str, Any] | None, Field(description="The tool's arguments.")] = None,
    ) -> CallToolResult:
        try:
            return await calling.call(service_id, arguments if arguments is not None else {}, via="call_service",
                                      report=_progress(ctx))
        except A2XError as exc:
            return _refused(exc)

    @server.tool(name="activate_services", title="Add tools to this session", annotations=ACTIVATES, description=(
        "Add found MCP tools to this session's tool list under their own names, to call them directly (the list "
        "changes: tools/list again). Only tools this client may run."))
    async def activate_services(
        service_ids: Annotated[list[str], Field(description="Service ids of tools (SERVER/TOOL).",
                                                json_schema_extra={"maxItems": 64})],
        ctx: Context,
    ) -> CallToolResult:
        done = await calling.activate(service_ids)
        await _tools_changed(ctx)
        lines = [f"{service_id}: {what}" for service_id, _, what in done]
        structured = {"activated": {sid: name for sid, name, _ in done if name},
                      "refused": {sid: what for sid, name, what in done if not name}}
        return _answer("\n".join(lines), structured)

    @server.tool(name="deactivate_services", title="Remove tools from this session", annotations=ACTIVATES,
                 description="Remove activated tools from this session's tool list (by service id or tool name).")
    async def deactivate_services(
        names: Annotated[list[str], Field(description="Service ids or tool names.",
                                          json_schema_extra={"maxItems": 64})],
        ctx: Context,
    ) -> CallToolResult:
        found = calling.deactivate(names)
        await _tools_changed(ctx)
        lines = [f"{name}: {'removed' if removed else 'was not active'}" for name, removed in found]
        return _answer("\n".join(lines), {"removed": [name for name, removed in found if removed]})

    server.middleware.append(_ActivatedTools(calling))


async def _tools_changed(ctx: Context) -> None:
    """notifications/tools/list_changed: on the connection (handshake-era clients over stdio) and to the
    subscriptions/listen streams (2026-07-28 clients); each channel drops what its era does not carry."""
    await ctx.session.send_tool_list_changed()
    await ctx.notify_tools_changed()


class _ActivatedTools:
    """MCP middleware: tools/list answers the server's tools plus this client's activated ones; a tools/call of an
    activated name is a gateway call (via "tool"), answered in the tool's own words."""

    def __init__(self, calling: Calling) -> None:
        self.calling = calling

    async def __call__(self, ctx: Any, call_next: Callable[[Any], Any]) -> Any:
        if ctx.method == "tools/call" and isinstance(ctx.params, dict):
            activation = self.calling.activation(str(ctx.params.get("name")))
            if activation is not None:
                arguments = ctx.params.get("arguments")

                async def report(progress: float, total: float | None, message: str) -> None:
                    await ctx.session.report_progress(progress, total, message)

                try:
                    result = await self.calling.call(activation.service_id, arguments if arguments is not None
                                                     else {}, via="tool", report=report,
                                                     server_hint=activation.server)
                except A2XError as exc:
                    result = _refused(exc)
                return result
        result = await call_next(ctx)
        if ctx.method == "tools/list" and result is not None:
            active = await self.calling.active()
            if active:
                tools = [Tool(name=a.name, description=a.description, input_schema=a.schema,
                              annotations=CALLS) for a in active]
                if isinstance(result, dict):
                    result = {**result, "tools": [*result.get("tools", []), *(tool.model_dump(
                        mode="json", by_alias=True, exclude_none=True) for tool in tools)]}
                else:
                    result = result.model_copy(update={"tools": [*result.tools, *tools]})
        return result


async def _resource(work: Any) -> str:
    try:
        view = await work
    except A2XError as exc:
        raise ResourceError(exc.message) from exc
    return json.dumps(visible(view).model_dump(mode="json", exclude_none=True), ensure_ascii=False)
