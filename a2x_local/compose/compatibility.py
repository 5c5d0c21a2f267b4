"""How well two services go together, from what the registry really holds.

Signals, each in [0, 1] and used only where both services carry what it needs:
- ``io``: the share of the later service's inputs that an output of the earlier one provides (MCP tools with an
  ``outputSchema``); the same overlap makes a dependency edge in the plan;
- ``params``: Jaccard overlap of the two input-parameter sets (services that take the same entities: a city, a
  ticker, an order id);
- ``origin``: the same MCP server (or, where servers are unknown, the same ingested source, when the registry
  holds more than one);
- ``category``: Jaccard overlap of the categories (with their ancestors) that hold each service in the active tree.
Compatibility is the mean of the signals present, or None when none is. Co-selection counts are not among them:
the registry records no service use yet.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from a2x_local.registry import Service
from a2x_local.taxonomy import Tree

SIGNALS = ("io", "params", "origin", "category")
_NOT_NAME = re.compile(r"[^0-9a-z]+")


def _field_names(schema: Any) -> dict[str, str]:
    """Field names of a JSON Schema object (``properties``) or of a plain ``{name: {...}}`` map, keyed by a
    normal form in which ``cityName``, ``city_name`` and ``city-name`` meet."""
    if not isinstance(schema, Mapping):
        return {}
    properties = schema.get("properties")
    names: Iterable[Any] = properties if isinstance(properties, Mapping) else (
        name for name, value in schema.items() if isinstance(value, Mapping))
    found: dict[str, str] = {}
    for name in names:
        if normal := _NOT_NAME.sub("", str(name).lower()):
            found.setdefault(normal, str(name))
    return found


@dataclass(frozen=True)
class Profile:
    """What compatibility reads about one service (field names in normal form; ``input_names`` as written)."""

    inputs: frozenset[str]
    outputs: frozenset[str]
    origin: str | None
    categories: frozenset[str]
    input_names: Mapping[str, str] = field(default_factory=dict, compare=False)


def jaccard(a: Iterable[str], b: Iterable[str]) -> float:
    """Overlap of two sets; two empty ones are the same set (1.0), which SAD's stopping rule relies on."""
    left, right = set(a), set(b)
    return len(left & right) / len(left | right) if left or right else 1.0


def tree_categories(tree: Tree | None) -> dict[str, frozenset[str]]:
    """Service id -> the categories holding it, ancestors included (the root left out: every service is in it)."""
    if tree is None:
        return {}
    found: dict[str, set[str]] = {}
    for node_id, node in tree.nodes.items():
        if node_id == tree.root_id:
            continue
        chain = set(tree.path(node_id)) - {tree.root_id}
        for service_id in node.services:
            found.setdefault(service_id, set()).update(chain)
    return {service_id: frozenset(nodes) for service_id, nodes in found.items()}


def profiles(services: Iterable[Service], tree: Tree | None) -> dict[str, Profile]:
    """A profile per service; sources count as origins only when the registry holds more than one."""
    services = list(services)
    several_sources = len({service.source for service in services if service.source}) > 1
    categories = tree_categories(tree)
    result = {}
    for service in services:
        metadata = service.metadata if isinstance(service.metadata, Mapping) else {}
        server = metadata.get("server")
        origin = f"server:{server}" if isinstance(server, str) and server else (
            f"source:{service.source}" if several_sources and service.source else None)
        inputs = _field_names(metadata.get("inputSchema"))
        result[service.id] = Profile(frozenset(inputs), frozenset(_field_names(metadata.get("outputSchema"))),
                                     origin, categories.get(service.id, frozenset()), inputs)
    return result


def feeds(earlier: Profile, later: Profile) -> list[str]:
    """The inputs of ``later`` (as its schema names them, sorted) that an output of ``earlier`` provides."""
    return sorted(later.input_names.get(name, name) for name in earlier.outputs & later.inputs)


def signals(earlier: Profile, later: Profile) -> dict[str, float]:
    """The signals both profiles support."""
    found: dict[str, float] = {}
    if earlier.outputs and later.inputs:
        found["io"] = len(earlier.outputs & later.inputs) / len(later.inputs)
    if earlier.inputs and later.inputs:
        found["params"] = jaccard(earlier.inputs, later.inputs)
    if earlier.origin and later.origin:
        found["origin"] = float(earlier.origin == later.origin)
    if earlier.categories and later.categories:
        found["category"] = jaccard(earlier.categories, later.categories)
    return found
