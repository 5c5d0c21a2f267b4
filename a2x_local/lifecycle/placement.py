"""Incremental placement: file new and changed services into an existing tree, take removed ones out.

By the model, a service is walked down the tree exactly as a search request is (the search stage's descent, its
`name: description` as the request, every service of the round in one engine call per level); it lands in every
category where the walk ends: the leaves reached, or a node where the model chose no child. A node where the model
chose more children than the build's generic limit keeps the service itself, as a build keeps generic services.
Without a model, the service goes to the leaf whose text (path, description, keywords, member names) is most
similar by embedding: named "embedding similarity" wherever it is reported, since no model judged it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from a2x_local.lifecycle.config import LifecycleConfig
from a2x_local.llm import Engine, load_embedding_model, resolve_embedding_model
from a2x_local.registry import Service
from a2x_local.search import descend_tree
from a2x_local.settings import Settings
from a2x_local.taxonomy import Tree, TreeNode

BY_MODEL = "model descent"
BY_EMBEDDING = "embedding similarity"


@dataclass
class Changes:
    """How the registry differs from a tree: services to file (new, rewritten) and services to take out."""

    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)

    @property
    def to_place(self) -> list[str]:
        return sorted([*self.added, *self.changed])

    @property
    def any(self) -> bool:
        return bool(self.added or self.changed or self.removed)

    def to_dict(self) -> dict[str, Any]:
        return {"added": self.added, "changed": self.changed, "removed": self.removed}


def registry_changes(tree: Tree, registry_ids: set[str], rewritten: set[str]) -> Changes:
    """``rewritten``: ids the registry added or updated after the tree was made (their text may differ)."""
    held = set(tree.service_ids())
    return Changes(added=sorted(registry_ids - held), changed=sorted(held & registry_ids & rewritten),
                   removed=sorted(held - registry_ids))


@dataclass
class Placement:
    """Where one service went and why."""

    service: str
    nodes: list[str]
    how: str
    score: float | None = None
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"service": self.service, "nodes": self.nodes, "how": self.how}
        if self.score is not None:
            data["similarity"] = round(self.score, 4)
        if self.note:
            data["note"] = self.note
        return data


def with_placements(tree: Tree, placements: Mapping[str, Placement]) -> Tree:
    """A copy of ``tree`` with each placed service added to its nodes."""
    nodes = copy.deepcopy(tree.nodes)
    for placement in placements.values():
        for node_id in placement.nodes:
            if placement.service not in nodes[node_id].services:
                nodes[node_id].services.append(placement.service)
    return Tree(nodes=nodes, registry_fingerprint=tree.registry_fingerprint, build_id=tree.build_id,
                root_id=tree.root_id)


def placement_request(service: Service, config: LifecycleConfig) -> str:
    """The request a service is walked down with: what a user needing exactly this service would ask for."""
    description = " ".join(service.description.split())
    if len(description) > config.placement_description_chars:
        description = description[: config.placement_description_chars - 1].rstrip() + "…"
    return f"I need a service that does this: {' '.join(service.name.split())}: {description}"


def _ends(tree: Tree, decisions: Mapping[str, Any], node_id: str,
          generic_limit: Callable[[int], int]) -> tuple[list[str], str | None]:
    """The nodes where a walk from ``node_id`` ends, and a note when it stopped above the leaves."""
    node = tree.node(node_id)
    decision = decisions.get(node_id)
    if node.is_leaf or decision is None:
        return [node_id], None
    if decision.fallback or not decision.selected:
        return [node_id], f"kept at {node_id}: the model chose none of its {len(node.children)} categories"
    if len(decision.selected) > generic_limit(len(node.children)):
        return [node_id], f"kept at {node_id}: generic ({len(decision.selected)} of {len(node.children)} chosen)"
    ends: list[str] = []
    notes = []
    for child in decision.selected:
        found, note = _ends(tree, decisions, child, generic_limit)
        ends.extend(n for n in found if n not in ends)
        if note:
            notes.append(note)
    return ends, "; ".join(notes) or None


def place_by_model(settings: Settings, tree: Tree, services: Mapping[str, Service], service_ids: Sequence[str],
                   engine: Engine, config: LifecycleConfig,
                   generic_limit: Callable[[int], int]) -> dict[str, Placement]:
    """Walk every service down ``tree`` in one batched descent; ``generic_limit(n)`` is the build's rule."""
    if not service_ids:
        return {}
    if not tree.root.children:
        return {s: Placement(s, [tree.root_id], BY_MODEL, note="the tree is a single node") for s in service_ids}
    requests = [placement_request(services[s], config) for s in service_ids]
    walks = descend_tree(settings, tree, engine, requests, mode=config.placement_mode)
    placed = {}
    for service_id, walk in zip(service_ids, walks, strict=True):
        decisions = {decision.node: decision for decision in walk.decisions}
        ends, note = _ends(tree, decisions, tree.root_id, generic_limit)
        placed[service_id] = Placement(service_id, ends, BY_MODEL, note=note)
    return placed


def leaf_text(tree: Tree, leaf: TreeNode, services: Mapping[str, Service], examples: int) -> str:
    """What a leaf is compared with: its path, description, keywords and some member names."""
    path = " > ".join(tree.node(n).name for n in tree.path(leaf.id)[1:]) or leaf.name
    parts = [f"{path}: {leaf.description}"]
    if leaf.keywords:
        parts.append("Keywords: " + ", ".join(leaf.keywords))
    names = [services[s].name for s in leaf.services[:examples] if s in services]
    if names:
        parts.append("Examples: " + ", ".join(names))
    return ". ".join(parts)


def place_by_embedding(tree: Tree, services: Mapping[str, Service], service_ids: Sequence[str],
                       config: LifecycleConfig) -> dict[str, Placement]:
    """Each service into its most similar leaf (cosine similarity of normalised embeddings)."""
    if not service_ids:
        return {}
    leaves = tree.leaves()
    model = load_embedding_model(resolve_embedding_model(config.embedding_model))
    leaf_vectors = model.encode([leaf_text(tree, leaf, services, config.embedding_leaf_examples) for leaf in leaves],
                                normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
    service_vectors = model.encode([services[s].text for s in service_ids], normalize_embeddings=True,
                                   convert_to_numpy=True, show_progress_bar=False)
    similarity = service_vectors @ leaf_vectors.T
    placed = {}
    for row, service_id in enumerate(service_ids):
        best = int(similarity[row].argmax())
        placed[service_id] = Placement(service_id, [leaves[best].id], BY_EMBEDDING, score=float(similarity[row, best]))
    return placed
