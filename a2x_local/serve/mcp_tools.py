"""The MCP face of the server (official SDK, 2.x): tools for agents, and the tree as resources.

The same `MCPServer` runs over stdio (`a2x-local serve --stdio`, for desktop and IDE agents) and over streamable
HTTP at /mcp next to the HTTP API. Tool descriptions are written for a model to read: what the tool is for, when
to call which, and what comes back.
"""

# No `from __future__ import annotations`: the SDK reads the tools' parameter annotations at run time, and they
# use this server's limits from the enclosing function.

import json
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from a2x_local import __version__
from a2x_local.compose import Plan
from a2x_local.errors import A2XError
from a2x_local.serve.compose_api import ComposeQuery, Planning
from a2x_local.serve.discovery import Discovery
from a2x_local.serve.views import NodeView, SearchQuery, SearchResult, ServiceView
from a2x_local.serve.visible import visible

INSTRUCTIONS = """\
This server finds the services (MCP tools and servers, A2A agents, skills, APIs) registered in an offline \
catalogue. Start with search_services and a description of what you need; call get_service on a hit for its \
full description and how to call it (an MCP tool's input schema, an A2A agent's endpoints). To look around \
instead, call browse_category from "root" and follow the children's ids."""

SEARCH_DESCRIPTION = """\
Find the services that can do a task. Describe the need in plain words (e.g. "convert 100 USD to EUR", \
"send a message to a Slack channel"), not a service name. Returns hits with each service's id, name, type and a \
one-line summary; call get_service with an id for everything about it.

method: "hybrid" (default on most servers; fast ranked retrieval) or an LLM method if the server runs a model: \
"a2x" walks the category tree with the model and returns the services it judges relevant (unranked), \
"a2x+rescue" adds retrieval hits to that. k limits ranked methods. mode (LLM methods): "get_all" \
(everything that could help), "get_important" (what the task needs), "get_one" (the single best service)."""

BROWSE_DESCRIPTION = """\
Look inside one category of the catalogue's tree: its description, its sub-categories (id, name, summary, how \
many services are under each) and the services filed directly in it. Start with node_id "root" and pass a child's \
id to go deeper. Useful to see what exists in an area, or when a search found nothing."""

GET_SERVICE_DESCRIPTION = """\
Everything stored about one service, by the id a search or browse returned: name, type, full description, its \
metadata (an MCP tool's input schema, an A2A agent card with its endpoints and skills, a skill's file), where it \
came from, and the tree categories it is filed under."""

COMPOSE_DESCRIPTION = """\
Plan a task that needs several services, e.g. "change my flight to Friday, then email the new itinerary to my \
team". The request is split into steps (each needing one service), every step is searched, and one service is \
chosen per step, with its alternatives, the dependencies between steps and the groups that can run in parallel. \
Use search_services instead for a single need. method: the search method of the steps (default: the server's \
compose setting); k: candidates per step."""

READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)


async def _answer(work: Any) -> Any:
    """The operation's answer; a user-facing error becomes a tool error the model can read and act on."""
    try:
        return visible(await work)    # bidi controls in names shown as <U+202E> (visible.py)
    except A2XError as exc:
        # The code leads, as the HTTP API's "error" field does, so an agent can tell errors apart without parsing.
        raise ToolError(f"{exc.code}: {exc.message}" + (f" (hint: {exc.hint})" if exc.hint else "")) from exc


def build_mcp(discovery: Discovery, planning: Planning) -> MCPServer:
    """An MCP server answering from ``discovery`` and ``planning`` (the tools are closures over them)."""
    config = discovery.config
    names = discovery.state.offered()
    step_names = discovery.state.offered(steps=True)
    # WARNING: the SDK configures the root logger at this level, and INFO would log every HTTP request made.
    server = MCPServer("a2x-local", title="a2x-local service discovery", instructions=INSTRUCTIONS,
                       version=__version__, log_level="WARNING")

    @server.tool(name="search_services", title="Search services", description=SEARCH_DESCRIPTION,
                 annotations=READ_ONLY)
    async def search_services(
        query: Annotated[str, Field(min_length=1, max_length=config.max_query_chars,
                                    description="What you need done, in words.")],
        method: Annotated[str | None, Field(description=f"One of: {', '.join(names)}. "
                                                        f"Default: {config.default_method}.")] = None,
        k: Annotated[int | None, Field(ge=1, le=config.max_k, description="How many ranked hits.")] = None,
        mode: Annotated[str | None, Field(description="LLM methods: get_all | get_important | get_one.")] = None,
    ) -> SearchResult:
        return await _answer(discovery.search(SearchQuery(query=query, method=method, k=k, mode=mode)))

    @server.tool(name="compose_plan", title="Plan a multi-step task", description=COMPOSE_DESCRIPTION,
                 annotations=READ_ONLY)
    async def compose_plan(
        request: Annotated[str, Field(min_length=1, max_length=config.max_query_chars,
                                      description="The whole task, in words.")],
        method: Annotated[str | None,
                          Field(description=f"Step search method, one of: {', '.join(step_names)}.")] = None,
        k: Annotated[int | None, Field(ge=1, le=config.max_k, description="Candidates per step.")] = None,
    ) -> Plan:
        return await _answer(planning.plan(ComposeQuery(request=request, method=method, k=k)))

    @server.tool(name="browse_category", title="Browse a category", description=BROWSE_DESCRIPTION,
                 annotations=READ_ONLY)
    async def browse_category(
        node_id: Annotated[str, Field(max_length=200, description='A category id; "root" for the top.')] = "root",
    ) -> NodeView:
        return await _answer(discovery.node(node_id))

    @server.tool(name="get_service", title="Get a service", description=GET_SERVICE_DESCRIPTION,
                 annotations=READ_ONLY)
    async def get_service(
        service_id: Annotated[str, Field(min_length=1, max_length=1000, description="The service's id.")],
    ) -> ServiceView:
        return await _answer(discovery.service(service_id))

    @server.resource("a2x://tree", name="tree", title="Category tree",
                     description="The active category tree: its statistics and the top-level categories.",
                     mime_type="application/json")
    async def tree_resource() -> str:
        return await _resource(discovery.tree())

    @server.resource("a2x://tree/nodes/{+node_id}", name="tree-node", title="Category",
                     description="One category of the active tree (as browse_category answers).",
                     mime_type="application/json")
    async def node_resource(node_id: str) -> str:
        return await _resource(discovery.node(node_id))

    return server


async def _resource(work: Any) -> str:
    try:
        view = await work
    except A2XError as exc:
        raise ResourceError(exc.message) from exc
    return json.dumps(visible(view).model_dump(mode="json"), ensure_ascii=False)
