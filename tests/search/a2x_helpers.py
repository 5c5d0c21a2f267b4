"""A hand-made tree, its services and an oracle rule for the scripted engine (tests of the LLM search methods).

root (own: g1)
├── 1 Travel (own: t0)
│   ├── 1 Flights: f1 f2 f3
│   └── 2 Hotels: h1 h2
├── 2 Weather: w1 w2 w3 w4
└── 3 Finance
    ├── 1 Payments: p1 p2
    └── 2 Stocks: s1 s2 s3 s4 f1   (f1 also filed here: a cross-domain service)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from a2x_local.llm.types import Request
from a2x_local.registry.types import Service
from a2x_local.search.llm.config import LlmSearchConfig
from a2x_local.search.llm.descent import option_services
from a2x_local.search.llm.positions import NONE
from a2x_local.taxonomy.types import Tree, TreeNode


def make_tree(shape: Mapping[str, tuple[str, list[str]]], *, fingerprint: str = "fp") -> Tree:
    """``shape``: node id -> (name, direct services); parents and depths follow from the ids."""
    nodes: dict[str, TreeNode] = {}
    for node_id, (name, services) in shape.items():
        parent = node_id.rsplit("/", 1)[0] if "/" in node_id else None
        nodes[node_id] = TreeNode(node_id, parent, node_id.count("/"), name, f"{name} services",
                                  boundary=f"NOT here: anything but {name.lower()}", services=list(services))
        if parent is not None:
            nodes[parent].children.append(node_id)
    return Tree(nodes=nodes, registry_fingerprint=fingerprint, build_id=7)


SHAPE = {
    "root": ("All services", ["g1"]),
    "root/1": ("Travel", ["t0"]),
    "root/1/1": ("Flights", ["f1", "f2", "f3"]),
    "root/1/2": ("Hotels", ["h1", "h2"]),
    "root/2": ("Weather", ["w1", "w2", "w3", "w4"]),
    "root/3": ("Finance", []),
    "root/3/1": ("Payments", ["p1", "p2"]),
    "root/3/2": ("Stocks", ["s1", "s2", "s3", "s4", "f1"]),
}


def descent_config(**overrides: object) -> LlmSearchConfig:
    """The packaged `[search]` defaults with direct selection off and a node's own services an option at the root
    only: the sample trees are so small that direct selection would send every reached branch to selection whole,
    and these tests watch the descent itself, node by node (tests of those two levers set them)."""
    return LlmSearchConfig.defaults(**{"direct_select_below": 0, "other_services_child": "root", **overrides})


def sample_tree() -> Tree:
    return make_tree(SHAPE)


def services_for(ids: Iterable[str]) -> dict[str, Service]:
    return {sid: Service(sid, "generic", f"tool_{sid}", f"Does the {sid} thing.") for sid in ids}


def sample_services() -> dict[str, Service]:
    return services_for(sorted({s for _, services in SHAPE.values() for s in services} | {"x1", "x2"}))


class Oracle:
    """Answers like a perfect model: options (a child's subtree, or a node's own services) that hold a wanted
    service, most wanted first and no more than the answer may hold, and the wanted services.

    ``wanted`` maps a query to its correct service ids. ``none_at`` lists (query, node) pairs answered NONE anyway;
    ``invalid_once`` makes the first attempt of matching requests invalid (to exercise the engine's retry).
    """

    def __init__(self, tree: Tree, wanted: Mapping[str, Iterable[str]], *, none_at: Iterable[tuple[str, str]] = (),
                 one_none: bool = False, invalid_once: Iterable[tuple[str, str]] = ()) -> None:
        self.tree = tree
        self.wanted = {query: set(ids) for query, ids in wanted.items()}
        self.none_at = set(none_at)
        self.one_none = one_none
        self.invalid_once = set(invalid_once)
        self.seen: list[Request] = []

    def __call__(self, request: Request) -> str:
        self.seen.append(request)
        context = request.context
        query, options = context["query"], context["options"]
        wanted = self.wanted.get(query, set())
        if (query, context.get("node", context.get("group"))) in self.invalid_once and request.temperature == 0:
            return "not a number"
        if context["call"] == "descend":
            if (query, context["node"]) in self.none_at:
                return NONE
            # The most relevant first (most wanted services), as a capped answer is asked to be.
            scored = [(len(option_services(self.tree, child) & wanted), k) for k, child in enumerate(options, 1)]
            chosen = [k for score, k in sorted(scored, key=lambda sk: (-sk[0], sk[1])) if score]
            return ",".join(map(str, chosen[: context["max_items"]])) or NONE
        else:
            if context["mode"] == "get_one" and self.one_none:
                return NONE
            chosen = [k for k, service in enumerate(options, 1) if service in wanted]
            if context["mode"] == "get_one":
                chosen = chosen[-1:]  # deliberately not the first, so tests see which pick won
            chosen = chosen[: context["max_items"]]
        return ",".join(map(str, chosen)) or NONE


def store_registry_and_tree(db_path, tree: Tree | None = None, services: Mapping[str, Service] | None = None,
                            *, stale: bool = False) -> int | None:
    """Write services and (optionally) an active tree into a fresh registry; returns the tree's build id."""
    from a2x_local.db import connect
    from a2x_local.registry import Registry
    from a2x_local.taxonomy import store

    with connect(db_path) as con:
        registry = Registry(con)
        registry.insert(list((services or sample_services()).values()))
        if tree is None:
            return None
        fingerprint = "not-this-registry" if stale else registry.fingerprint()
        return store.save_completed(con, tree, kind="import", fingerprint=fingerprint, stats={}, make_active=True,
                                    source="test")
