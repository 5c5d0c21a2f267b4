"""The A2X descent and search over a tree the caller holds, rather than the registry's active tree.

Incremental placement walks a new service down the tree exactly as a query is walked (the service's text is the
query), and the nightly regression gate searches a candidate tree and the active one side by side: both need the
method itself, not a tree picked by the method factory.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from a2x_local.llm import Engine
from a2x_local.registry import Service
from a2x_local.search.llm.a2x import A2XSearch
from a2x_local.search.llm.config import LlmSearchConfig
from a2x_local.search.llm.descent import Descender, Walk
from a2x_local.search.llm.rounds import RoundRunner
from a2x_local.search.methods import check_mode
from a2x_local.search.types import MODES
from a2x_local.settings import Settings
from a2x_local.taxonomy import Tree


def descend_tree(settings: Settings, tree: Tree, engine: Engine, queries: Sequence[str], *, mode: str | None = None,
                 **overrides: Any) -> list[Walk]:
    """Walk every query down ``tree`` together (one engine round per level); `[search]` keys in ``overrides``.

    Each walk lists the nodes visited and the decision taken at each (children selected, or a fallback).
    Placement files a service by these decisions, so every reached category is decided on (no direct selection
    below a size), a node's own services are no option (a service is filed into categories, not beside another
    node's services), and categories are shown as built (full lines, unless ``overrides`` say otherwise): the
    compact lines save tokens on every query, while a placement is made once per service and decides where it is
    found.
    """
    config = LlmSearchConfig.from_settings(settings, **{"category_lines": "full", **overrides,
                                                        "direct_select_below": 0, "other_services_child": "none"})
    chosen = str(check_mode("a2x", MODES, mode, default=config.default_mode))
    runner = RoundRunner(engine, len(queries))
    return Descender(tree, engine, config).descend([(query, chosen) for query in queries], runner)


def tree_search(settings: Settings, tree: Tree, services: Mapping[str, Service], engine: Engine, *,
                name: str | None = None, **overrides: Any) -> A2XSearch:
    """The `a2x` search method over ``tree`` (every service it names must be in ``services``)."""
    return A2XSearch(tree, services, engine, LlmSearchConfig.from_settings(settings, **overrides),
                     name=name or f"a2x tree {tree.build_id}")
