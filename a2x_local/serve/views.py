"""What the server answers, as pydantic models: the HTTP API's JSON, the MCP tools' structured results and the
browser page all use these, so an agent sees the same fields whichever way it asks.

Answers are lean by default: a search answer is its hits (id, name, type, one-line summary, score, where the active
tree files the service) and what was searched; what it cost (the Python API's `SearchCost` fields, seconds) and its
trace come only with ``detail: "full"``. Fields without a value are left out of the JSON. Every list is paged
(`limit`, `cursor` -> `next_cursor`).
"""

from __future__ import annotations

import re
from dataclasses import asdict
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from a2x_local.llm import clip
from a2x_local.registry import Service
from a2x_local.search import SearchAnswer, SearchCost
from a2x_local.taxonomy import Tree, TreeNode

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]+")
Detail = Literal["brief", "full"]
CATEGORY_SEPARATOR = " › "


def one_line(text: str, limit: int) -> str:
    """The text on one line (control characters and line breaks become spaces), cut at ``limit`` with "…"."""
    return clip(_CONTROL.sub(" ", text or ""), limit)


class ErrorBody(BaseModel):
    """Every error answer: a code to branch on, a message to show, a hint that says what to do."""

    error: str = Field(description="The error code, e.g. NoSuchService, BadK, NoModel, Loading.")
    message: str
    hint: str | None = None


class Filters(BaseModel):
    """Which services a search or a listing keeps."""

    model_config = ConfigDict(extra="forbid")

    type: str | None = Field(None, description="Only services of this type: mcp_tool, mcp_server, a2a, skill or "
                                               "generic.")
    source: str | None = Field(None, description="Only services whose source (the file they were loaded from) "
                                                 "contains this text, e.g. 'mcp_servers.json' or 'skills/'.")


class SearchQuery(Filters):
    """One search: the Python API's `SearchRequest` (query, k, mode) plus the method, filters, paging and detail."""

    query: str = Field(description="What the agent needs, in words.")
    method: str | None = Field(None, description="Search method (GET /v1/methods lists them); default: the server's.")
    k: int | None = Field(None, description="Hits per page ([serve] default_k when left out).")
    mode: str | None = Field(None, description="LLM methods: get_all | get_important | get_one.")
    cursor: str | None = Field(None, description="next_cursor of the previous page.")
    detail: Detail = Field("brief", description='"full" adds what the search cost and its trace.')


class SearchBatchQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    requests: list[SearchQuery] = Field(description="Searches answered together.")


class HitView(BaseModel):
    service_id: str
    name: str
    type: str
    summary: str = Field(description="The description on one line, shortened.")
    score: float | None = Field(None, description="Ranked methods only.")
    path: list[str] = Field(default_factory=list, description="Tree node ids from the root to where the service "
                                                              "was found (LLM tree methods) or is filed.")
    category: str | None = Field(None, description="The category names of `path` below the root ('' for the root).")
    has_schema: bool = Field(False, description="get_service gives its parameters as JSON Schema "
                                                "(parameters_schema).")


class SearchResultCost(BaseModel, SearchCost):
    """What one search cost, as the server reports it with detail "full": the one cost type's fields (`SearchCost`:
    calls, tokens, rounds, candidates shown, capped answers) under their JSON keys, and the seconds it took."""

    seconds: float = 0.0


class SearchResult(BaseModel):
    """A search answer as the server gives it: the hits with what an agent needs to choose among them, and the
    cursor of the next page; ``cost`` (`SearchResultCost`) and ``trace`` with detail "full"."""

    method: str
    mode: str | None = None
    tree: int | None = Field(None, description="Build id of the tree searched (LLM tree methods).")
    query: str
    ranked: bool
    hits: list[HitView]
    next_cursor: str | None = None
    cost: SearchResultCost | None = Field(None, description='With detail "full": calls, tokens, rounds, '
                                                            "candidates shown, capped answers, seconds.")
    trace: dict[str, Any] | None = Field(None, description='With detail "full", LLM methods: the walk down the tree.')
    error: str | None = None


class SearchBatchResult(BaseModel):
    results: list[SearchResult]


class ServiceRef(BaseModel):
    id: str
    name: str
    type: str
    summary: str


class ServiceList(BaseModel):
    """One page of the registry's services (in id order), after the filters."""

    total: int = Field(description="Services that pass the filters.")
    services: list[ServiceRef]
    next_cursor: str | None = None


class CategoryRef(BaseModel):
    id: str
    name: str
    summary: str
    size: int = Field(description="Distinct services anywhere under this category.")
    children: int = Field(description="Number of sub-categories (0: a leaf).")


class NodeView(BaseModel):
    """One category: where it is, what it holds, a page of its sub-categories and of its own services."""

    tree: int | None
    id: str
    name: str
    description: str
    boundary: str = ""
    decision_rule: str = ""
    keywords: list[str] = Field(default_factory=list)
    depth: int
    path: list[CategoryRef] = Field(description="The categories from the root down to this one's parent.")
    size: int
    children: list[CategoryRef] = Field(description="A page of its sub-categories (at most `limit`).")
    children_total: int
    services: list[ServiceRef] = Field(description="A page of the services filed directly here (a leaf's, or an "
                                                   "internal node's generic ones; at most `limit`).")
    services_total: int
    next_cursor: str | None = Field(None, description="The next page of sub-categories and services.")


class TreeView(BaseModel):
    build_id: int | None
    registry_fingerprint: str
    stale: bool = Field(description="Built for other registry contents (services changed since).")
    stats: dict[str, Any]
    root: NodeView


class ServiceView(BaseModel):
    """Everything stored about a service (an MCP tool's input schema, an A2A card and its endpoints are in
    ``metadata``), and the categories of the active tree it is filed under."""

    id: str
    type: str
    name: str
    description: str
    metadata: dict[str, Any]
    source: str | None
    parameters_schema: dict[str, Any] | None = Field(None, description="Its parameters as one JSON Schema object "
                                                     "(type object, properties, required), whatever shape its "
                                                     "format gave them; the original stays in metadata.")
    categories: list[list[CategoryRef]] = Field(description="Each placement as its path from the top level down; a "
                                                            "service filed at the root has the path [root].")


class MethodInfo(BaseModel):
    """A search method's declared facts (its spec) and whether this server can run it (and if not, why)."""

    name: str
    summary: str
    llm: bool = Field(description="Needs a model (the server must run with --model).")
    engine: str = Field(description="Its use of a model: none, optional (uses the server's when there is one), "
                                    "required.")
    tree: bool = Field(description="Searches the active tree (needs one).")
    use: Literal["search", "plan"] = Field(description="plan: compose; ask POST /v1/compose (MCP compose_plan) for "
                                                       "the plan, /v1/search gives its services as one ranking.")
    available: bool = Field(description="This server can run it now.")
    reason: str | None = Field(None, description="Why it is not available, and what would enable it.")
    modes: list[str]
    cost: str = Field(description="What a query costs: retrieval (no model), llm (a few short prompts), llm-heavy (one "
                                  "very long prompt).")
    cost_note: str = Field(description="The cost in words.")
    default: bool


class Health(BaseModel):
    status: Literal["ok", "loading", "degraded", "failed"] = Field(
        description="loading: still preparing (see `loading`); the server answers what it can meanwhile. degraded: "
                    "the file under the server cannot be read now; it serves the snapshot it holds (see `problems`).")
    services: int | None
    tree: int | None
    tree_stale: bool
    generation: int
    engine: dict[str, Any] | None
    methods: list[str]
    problems: dict[str, str] = Field(default_factory=dict,
                                     description="What does not work now, and why (methods served from an older "
                                                 "snapshot, a model that failed to start).")
    loading: dict[str, Any] = Field(default_factory=dict, description="What is being prepared, with progress.")
    types: dict[str, int] = Field(default_factory=dict, description="Services per type.")
    limits: dict[str, int] = Field(default_factory=dict, description="What a client may ask for.")
    gateway: dict[str, Any] | None = Field(None, description="With a gateway file: its path, its servers, their live "
                                                             "sessions, audit rows not written yet, a problem.")


def category_ref(tree: Tree, node: TreeNode, chars: int) -> CategoryRef:
    return CategoryRef(id=node.id, name=node.name, summary=one_line(node.description, chars),
                       size=tree.subtree_size(node.id), children=len(node.children))


def service_ref(service: Service, chars: int) -> ServiceRef:
    return ServiceRef(id=service.id, name=service.name, type=service.type, summary=one_line(service.description, chars))


def placement_path(tree: Tree, node_id: str, chars: int) -> list[CategoryRef]:
    """Where a service is filed, from the top level down; [root] for a service filed at the root."""
    ids = tree.path(node_id)[1:] or [tree.root_id]
    return [category_ref(tree, tree.node(n), chars) for n in ids]


def node_view(tree: Tree, node_id: str, services: dict[str, Service], *, chars: int,
              children: tuple[list[TreeNode], int], listed: tuple[list[Service], int],
              next_cursor: str | None) -> NodeView:
    """A category with one page of its sub-categories and services (each with its total)."""
    node = tree.node(node_id)
    path = [category_ref(tree, tree.node(n), chars) for n in tree.path(node_id)[:-1]]
    return NodeView(tree=tree.build_id, id=node.id, name=node.name, description=node.description,
                    boundary=node.boundary, decision_rule=node.decision_rule, keywords=list(node.keywords),
                    depth=node.depth, path=path, size=tree.subtree_size(node.id),
                    children=[category_ref(tree, child, chars) for child in children[0]], children_total=children[1],
                    services=[service_ref(s, chars) for s in listed[0]], services_total=listed[1],
                    next_cursor=next_cursor)


def hit_view(service: Service, score: float | None, path: list[str], tree: Tree | None, chars: int) -> HitView:
    category = None
    if tree is not None and path and all(node in tree.nodes for node in path):
        category = CATEGORY_SEPARATOR.join(tree.node(n).name for n in path[1:])
    return HitView(service_id=service.id, name=service.name, type=service.type,
                   summary=one_line(service.description, chars), score=score, path=path, category=category,
                   has_schema=service.parameters_schema is not None)


def search_result(method: str, mode: str | None, answer: SearchAnswer, hits: list[HitView], *, detail: str,
                  next_cursor: str | None) -> SearchResult:
    trace = answer.trace or {}
    cost = None
    if detail == "full":
        cost = SearchResultCost(**asdict(answer.cost), seconds=round(answer.seconds, 6))
    return SearchResult(method=method, mode=trace.get("mode", mode), tree=trace.get("tree"), query=answer.query,
                        ranked=answer.ranked, hits=hits, next_cursor=next_cursor, cost=cost,
                        trace=answer.trace if detail == "full" else None, error=answer.error)
