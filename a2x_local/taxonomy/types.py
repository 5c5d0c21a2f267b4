"""The category tree as plain data: what a build produces, what search walks, what import/export exchange."""

from __future__ import annotations

import copy
import statistics
from collections import defaultdict
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

ROOT_ID = "root"


def child_id(parent_id: str, position: int) -> str:
    """Category ids come from code, never from a model: the parent's id plus the 1-based position."""
    return f"{parent_id}/{position}"


@dataclass
class TreeNode:
    """One category. ``services`` are its direct members: a leaf's services, or an internal node's generic ones."""

    id: str
    parent: str | None
    depth: int
    name: str
    description: str
    boundary: str = ""
    decision_rule: str = ""
    keywords: list[str] = field(default_factory=list)
    children: list[str] = field(default_factory=list)
    services: list[str] = field(default_factory=list)

    @property
    def is_leaf(self) -> bool:
        return not self.children


@dataclass(frozen=True)
class TreeStats:
    """The numbers `tree stats` prints and builds store."""

    depth: int
    nodes: int
    internal_nodes: int
    leaves: int
    leaf_size_mean: float
    leaf_size_std: float
    leaf_size_max: int
    largest_leaf: str | None
    branching_by_depth: dict[int, float]
    root_fanout: int
    services: int
    services_on_several_leaves: int
    services_on_internal_nodes: int
    mean_nodes_per_service: float
    mean_leaves_per_service: float        # leaf placements per service of the tree (multi-label placement)

    def to_dict(self) -> dict[str, Any]:
        return {k: (dict(v) if isinstance(v, dict) else v) for k, v in self.__dict__.items()}


@dataclass
class Tree:
    """A rooted category tree over service ids."""

    nodes: dict[str, TreeNode]
    registry_fingerprint: str = ""
    build_id: int | None = None
    root_id: str = ROOT_ID

    @property
    def root(self) -> TreeNode:
        return self.nodes[self.root_id]

    def node(self, node_id: str) -> TreeNode:
        return self.nodes[node_id]

    def children(self, node_id: str) -> list[TreeNode]:
        return [self.nodes[c] for c in self.nodes[node_id].children]

    def walk(self, start: str | None = None) -> Iterator[TreeNode]:
        """Depth-first, children in their stored order."""
        stack = [start or self.root_id]
        while stack:
            node = self.nodes[stack.pop()]
            yield node
            stack.extend(reversed(node.children))

    def leaves(self) -> list[TreeNode]:
        return [node for node in self.walk() if node.is_leaf]

    def path(self, node_id: str) -> list[str]:
        """Ids from the root down to ``node_id``."""
        path = []
        current: str | None = node_id
        while current is not None:
            path.append(current)
            current = self.nodes[current].parent
        return path[::-1]

    def without_services(self, service_ids: Collection[str]) -> Tree:
        """A copy with ``service_ids`` taken out of every node (categories stay, even when emptied): a tree as it
        serves a registry that lost them, or the base a tree update places changed services into again."""
        gone = set(service_ids)
        nodes = copy.deepcopy(self.nodes)
        for node in nodes.values():
            node.services = [s for s in node.services if s not in gone]
        return Tree(nodes=nodes, registry_fingerprint=self.registry_fingerprint, build_id=self.build_id,
                    root_id=self.root_id)

    def path_names(self, node_id: str, *, with_root: bool = False) -> str:
        """The category names from the top level (or the root) down to ``node_id``, joined with " › "."""
        ids = self.path(node_id) if with_root else self.path(node_id)[1:]
        return " › ".join(self.nodes[n].name for n in ids)

    @cached_property
    def _subtree_services(self) -> dict[str, frozenset[str]]:
        result: dict[str, frozenset[str]] = {}
        for node in reversed(list(self.walk())):
            members = set(node.services)
            for child in node.children:
                members |= result[child]
            result[node.id] = frozenset(members)
        return result

    def subtree_services(self, node_id: str) -> frozenset[str]:
        """Distinct services anywhere under ``node_id`` (the tree must not change after the first call)."""
        return self._subtree_services[node_id]

    def subtree_size(self, node_id: str) -> int:
        return len(self.subtree_services(node_id))

    def service_ids(self) -> frozenset[str]:
        return self.subtree_services(self.root_id)

    def stats(self) -> TreeStats:
        nodes = list(self.walk())
        leaves = [n for n in nodes if n.is_leaf and n.id != self.root_id] or [self.root]
        internal = [n for n in nodes if n.children]
        leaf_sizes = [len(n.services) for n in leaves]
        by_depth: dict[int, list[int]] = defaultdict(list)
        for n in internal:
            by_depth[n.depth].append(len(n.children))
        places: dict[str, int] = defaultdict(int)
        leaf_places: dict[str, int] = defaultdict(int)
        for n in nodes:
            for s in n.services:
                places[s] += 1
                if n.is_leaf:
                    leaf_places[s] += 1
        largest = max(leaves, key=lambda n: len(n.services)) if leaves else None
        return TreeStats(
            depth=max(n.depth for n in nodes),
            nodes=len(nodes),
            internal_nodes=len(internal),
            leaves=len(leaves),
            leaf_size_mean=round(statistics.fmean(leaf_sizes), 2) if leaf_sizes else 0.0,
            leaf_size_std=round(statistics.pstdev(leaf_sizes), 2) if leaf_sizes else 0.0,
            leaf_size_max=max(leaf_sizes, default=0),
            largest_leaf=largest.id if largest else None,
            branching_by_depth={d: round(statistics.fmean(v), 2) for d, v in sorted(by_depth.items())},
            root_fanout=len(self.root.children),
            services=len(places),
            services_on_several_leaves=sum(1 for c in leaf_places.values() if c > 1),
            services_on_internal_nodes=len({s for n in internal for s in n.services}),
            mean_nodes_per_service=round(statistics.fmean(places.values()), 2) if places else 0.0,
            mean_leaves_per_service=round(sum(leaf_places.values()) / len(places), 2) if places else 0.0,
        )

    def to_nested(self, node_id: str | None = None) -> dict[str, Any]:
        """The documented exchange format (`tree export --format json`, `tree import`)."""
        node = self.nodes[node_id or self.root_id]
        data: dict[str, Any] = {"name": node.name, "description": node.description}
        if node.boundary:
            data["boundary"] = node.boundary
        if node.decision_rule:
            data["decision_rule"] = node.decision_rule
        if node.keywords:
            data["keywords"] = list(node.keywords)
        data["services"] = list(node.services)
        data["children"] = [self.to_nested(c) for c in node.children]
        return data
