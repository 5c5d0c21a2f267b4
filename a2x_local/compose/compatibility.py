"""How well two services go together (SkillWeaver's compatibility), from what the registry really holds.

The published signals, each in [0, 1] and used only where both services carry what it needs:
- ``io``: I/O types: the share of the later service's inputs that an output of the earlier one provides, by field
  name with a compatible JSON type (MCP tools with an ``outputSchema``); the same overlap makes a dependency edge;
- ``category``: Jaccard overlap of the categories (with their ancestors) that hold each service in the active tree;
- ``keywords``: keyword co-occurrence of the two services' texts: the words both name and descriptions use, each
  weighted by how rare it is in the registry (inverse document frequency), over the words either uses.
Two more can be switched on (`[compose] signals`): ``params``, the Jaccard overlap of the two input-parameter sets,
and ``origin``, the same MCP server (or ingested source when the registry holds several). ``origin`` is off by
default: it rewarded pairs from one ingest file whatever they did, and helped no measured set (docs/compose.md).
Compatibility is the mean of the signals present, or None when none is.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from a2x_local.registry import Service
from a2x_local.taxonomy import Tree

SIGNALS = ("io", "category", "keywords", "params", "origin")
PUBLISHED = ("io", "category", "keywords")
_NOT_NAME = re.compile(r"[^0-9a-z]+")
_NUMBERS = frozenset({"number", "integer"})
Tokenize = Callable[[Sequence[str]], list[list[str]]]


def _fields(schema: Any) -> dict[str, tuple[str, str | None]]:
    """Field names of a JSON Schema object (``properties``) or of a plain ``{name: {...}}`` map, keyed by a
    normal form in which ``cityName``, ``city_name`` and ``city-name`` meet: (name as written, JSON type)."""
    if not isinstance(schema, Mapping):
        return {}
    properties = schema.get("properties")
    table: Mapping[Any, Any] = properties if isinstance(properties, Mapping) else {
        name: value for name, value in schema.items() if isinstance(value, Mapping)}
    found: dict[str, tuple[str, str | None]] = {}
    for name, spec in table.items():
        kind = spec.get("type") if isinstance(spec, Mapping) else None
        if normal := _NOT_NAME.sub("", str(name).lower()):
            found.setdefault(normal, (str(name), kind.lower() if isinstance(kind, str) else None))
    return found


@dataclass(frozen=True)
class Profile:
    """What compatibility reads about one service (field names in normal form, with their JSON types)."""

    inputs: frozenset[str]
    outputs: frozenset[str]
    origin: str | None
    categories: frozenset[str]
    input_names: Mapping[str, str] = field(default_factory=dict, compare=False)
    input_types: Mapping[str, str | None] = field(default_factory=dict, compare=False)
    output_types: Mapping[str, str | None] = field(default_factory=dict, compare=False)
    keywords: frozenset[str] = frozenset()


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


@dataclass(frozen=True)
class KeywordWeights:
    """Inverse document frequency of each keyword over the registry: shared rare words say more than shared common
    ones ("forecast" against "get")."""

    idf: Mapping[str, float]
    default: float

    @classmethod
    def of(cls, keyword_sets: Sequence[frozenset[str]]) -> KeywordWeights:
        counts = Counter(word for words in keyword_sets for word in words)
        total = max(1, len(keyword_sets))
        return cls({word: math.log(1 + total / count) for word, count in counts.items()}, math.log(1 + total))

    def overlap(self, a: frozenset[str], b: frozenset[str]) -> float:
        union = a | b
        if not union:
            return 0.0
        weight = sum(self.idf.get(word, self.default) for word in union)
        return sum(self.idf.get(word, self.default) for word in a & b) / weight


def profiles(services: Iterable[Service], tree: Tree | None, tokenize: Tokenize | None = None,
             ) -> tuple[dict[str, Profile], KeywordWeights]:
    """A profile per service, and the registry's keyword weights (empty without ``tokenize``); sources count as
    origins only when the registry holds more than one."""
    services = list(services)
    several_sources = len({service.source for service in services if service.source}) > 1
    categories = tree_categories(tree)
    keyword_sets = ([frozenset(words) for words in tokenize([f"{s.name} {s.description}" for s in services])]
                    if tokenize is not None else [frozenset()] * len(services))
    result = {}
    for service, keywords in zip(services, keyword_sets, strict=True):
        metadata = service.metadata if isinstance(service.metadata, Mapping) else {}
        server = metadata.get("server")
        origin = f"server:{server}" if isinstance(server, str) and server else (
            f"source:{service.source}" if several_sources and service.source else None)
        inputs, outputs = _fields(metadata.get("inputSchema")), _fields(metadata.get("outputSchema"))
        result[service.id] = Profile(
            frozenset(inputs), frozenset(outputs), origin, categories.get(service.id, frozenset()),
            {k: name for k, (name, _) in inputs.items()}, {k: kind for k, (_, kind) in inputs.items()},
            {k: kind for k, (_, kind) in outputs.items()}, keywords)
    return result, KeywordWeights.of(keyword_sets)


def _types_meet(given: str | None, wanted: str | None) -> bool:
    """Whether an output of JSON type ``given`` can fill an input of type ``wanted`` (unknown types, and a string
    input, take anything; integers and numbers meet)."""
    if given is None or wanted is None or wanted == "string" or given == wanted:
        return True
    return given in _NUMBERS and wanted in _NUMBERS


def feeds(earlier: Profile, later: Profile) -> list[str]:
    """The inputs of ``later`` (as its schema names them, sorted) that an output of ``earlier`` provides."""
    return sorted(later.input_names.get(name, name) for name in earlier.outputs & later.inputs
                  if _types_meet(earlier.output_types.get(name), later.input_types.get(name)))


def signals(earlier: Profile, later: Profile, *, enabled: Iterable[str] = SIGNALS,
            weights: KeywordWeights | None = None) -> dict[str, float]:
    """The ``enabled`` signals both profiles support."""
    wanted = set(enabled)
    found: dict[str, float] = {}
    if "io" in wanted and earlier.outputs and later.inputs:
        found["io"] = len(feeds(earlier, later)) / len(later.inputs)
    if "category" in wanted and earlier.categories and later.categories:
        found["category"] = jaccard(earlier.categories, later.categories)
    if "keywords" in wanted and earlier.keywords and later.keywords:
        found["keywords"] = (weights or KeywordWeights({}, 1.0)).overlap(earlier.keywords, later.keywords)
    if "params" in wanted and earlier.inputs and later.inputs:
        found["params"] = jaccard(earlier.inputs, later.inputs)
    if "origin" in wanted and earlier.origin and later.origin:
        found["origin"] = float(earlier.origin == later.origin)
    return found
