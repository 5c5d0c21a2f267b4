"""What the server answers, as pydantic models: the HTTP API's JSON, the MCP tools' structured results and the
browser page all use these, so an agent sees the same fields whichever way it asks.

A search answer carries the fields of the Python API's `SearchAnswer` (query, hits, ranked, tokens, calls,
rounds, candidates_shown, capped, seconds, trace, error), each hit those of `Hit` (service_id, score, path) plus the
service's name, type and a one-line summary, so an agent can choose without a second call.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from a2x_local.llm import clip
from a2x_local.registry import Service
from a2x_local.search import SearchAnswer, SearchCost
from a2x_local.taxonomy import Tree, TreeNode

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]+")


def one_line(text: str, limit: int) -> str:
    """The text on one line (control characters and line breaks become spaces), cut at ``limit`` with "…"."""
    return clip(_CONTROL.sub(" ", text or ""), limit)


class SearchQuery(BaseModel):
    """One search: the Python API's `SearchRequest` (query, k, mode) plus the method and whether to trace."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(description="What the agent needs, in words.")
    method: str | None = Field(None, description="Search method (GET /v1/methods lists them); default: the server's.")
    k: int | None = Field(None, description="Ranked methods: how many services to return.")
    mode: str | None = Field(None, description="LLM methods: get_all | get_important | get_one.")
    trace: bool = Field(False, description="LLM methods: include the walk down the tree and the selection calls.")


class SearchBatchQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    requests: list[SearchQuery] = Field(description="Searches answered together.")


class HitView(BaseModel):
    service_id: str
    score: float | None = None
    path: list[str] = Field(default_factory=list, description="Tree node ids from the root to where it was found.")
    name: str | None = None
    type: str | None = None
    summary: str | None = Field(None, description="The description on one line, shortened.")


class SearchResult(BaseModel, SearchCost):
    """A search answer as the server gives it: the search's cost (`SearchCost`: calls, tokens, rounds, candidates
    shown, capped answers), the method, and the hits with what an agent needs to choose among them."""

    method: str
    mode: str | None = None
    tree: int | None = Field(None, description="Build id of the tree searched (LLM tree methods).")
    query: str
    hits: list[HitView]
    ranked: bool
    seconds: float = 0.0
    trace: dict[str, Any] | None = None
    error: str | None = None


class SearchBatchResult(BaseModel):
    results: list[SearchResult]


class ServiceRef(BaseModel):
    id: str
    name: str
    type: str
    summary: str


class CategoryRef(BaseModel):
    id: str
    name: str
    summary: str
    size: int = Field(description="Distinct services anywhere under this category.")
    children: int = Field(description="Number of sub-categories (0: a leaf).")


class NodeView(BaseModel):
    """One category: where it is, what it holds, and its sub-categories."""

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
    children: list[CategoryRef]
    services: list[ServiceRef] = Field(description="Services filed directly here (a leaf's, or an internal "
                                                   "node's generic ones), at most [serve] max_node_services.")
    services_total: int


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
    categories: list[list[CategoryRef]] = Field(description="Each placement as its path from the root.")


class MethodInfo(BaseModel):
    """A search method's declared facts (its spec) and whether this server can run it."""

    name: str
    summary: str
    llm: bool = Field(description="Needs a model (the server must run with --model).")
    engine: str = Field(description="Its use of a model: none, optional (uses the server's when there is one), "
                                    "required.")
    available: bool = Field(description="This server can run it (it needs no model, or the server has one).")
    modes: list[str]
    cost: str = Field(description="What a query costs: retrieval (no model), llm (a few short prompts), llm-heavy (one "
                                  "very long prompt).")
    cost_note: str = Field(description="The cost in words.")
    default: bool


class Health(BaseModel):
    status: str
    services: int
    tree: int | None
    tree_stale: bool
    generation: int
    engine: dict[str, Any] | None
    methods: list[str]
    problems: dict[str, str] = Field(default_factory=dict,
                                     description="Methods currently served from an older snapshot, and why.")


def category_ref(tree: Tree, node: TreeNode, chars: int) -> CategoryRef:
    return CategoryRef(id=node.id, name=node.name, summary=one_line(node.description, chars),
                       size=tree.subtree_size(node.id), children=len(node.children))


def service_ref(service: Service, chars: int) -> ServiceRef:
    return ServiceRef(id=service.id, name=service.name, type=service.type, summary=one_line(service.description, chars))


def node_view(tree: Tree, node_id: str, services: dict[str, Service], *, chars: int, max_services: int) -> NodeView:
    node = tree.node(node_id)
    listed = [services[sid] for sid in node.services if sid in services][:max_services]
    path = [category_ref(tree, tree.node(n), chars) for n in tree.path(node_id)[:-1]]
    children = [category_ref(tree, child, chars) for child in tree.children(node_id)]
    return NodeView(tree=tree.build_id, id=node.id, name=node.name, description=node.description,
                    boundary=node.boundary, decision_rule=node.decision_rule, keywords=list(node.keywords),
                    depth=node.depth, path=path, size=tree.subtree_size(node.id), children=children,
                    services=[service_ref(s, chars) for s in listed], services_total=len(node.services))


def search_result(method: str, mode: str | None, answer: SearchAnswer, services: dict[str, Service], *,
                  chars: int, trace: bool) -> SearchResult:
    hits = []
    for hit in answer.hits:
        service = services.get(hit.service_id)
        hits.append(HitView(service_id=hit.service_id, score=hit.score, path=list(hit.path),
                            name=service.name if service else None, type=service.type if service else None,
                            summary=one_line(service.description, chars) if service else None))
    tree = answer.trace.get("tree") if answer.trace else None
    return SearchResult(method=method, mode=(answer.trace or {}).get("mode", mode), tree=tree, query=answer.query,
                        hits=hits, ranked=answer.ranked, seconds=round(answer.seconds, 6),
                        trace=answer.trace if trace else None, error=answer.error,
                        **answer.cost_values(SearchCost))
