"""Candidate groups for service selection: de-duplicated, small groups merged, large groups split.

Small groups are merged by their deepest common ancestor in the tree (siblings first, cousins next), which keeps
related services in one prompt and saves the fixed cost of a call; any group above the cap is split into
near-equal parts so no selection prompt outgrows the budget. Order is deterministic: tree pre-order of the group's
node, then part number; the order of services inside a group is the order they were reached in.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from a2x_local.taxonomy.types import Tree

RESCUE_KEY = "rescue"
RETRIEVED_KEY = "retrieved"


@dataclass
class Group:
    """Services shown together in one selection prompt. ``key`` is the tree node the group covers (or a tag)."""

    key: str
    services: list[str]
    part: int = 1
    parts: int = 1

    def to_dict(self) -> dict[str, object]:
        return {"key": self.key, "part": self.part, "parts": self.parts, "services": list(self.services)}


@dataclass
class TreeIndex:
    """Pre-order positions and root paths of a tree, computed once per method rather than once per query."""

    tree: Tree
    order: dict[str, int] = field(init=False)
    paths: dict[str, tuple[str, ...]] = field(init=False)

    def __post_init__(self) -> None:
        self.order = {}
        self.paths = {}
        for position, node in enumerate(self.tree.walk()):
            self.order[node.id] = position
            parent_path = self.paths[node.parent] if node.parent is not None else ()
            self.paths[node.id] = (*parent_path, node.id)

    def common_depth(self, a: str, b: str) -> tuple[int, str]:
        """Depth and id of the deepest common ancestor of two nodes."""
        path_a, path_b = self.paths[a], self.paths[b]
        depth = 0
        while depth < min(len(path_a), len(path_b)) and path_a[depth] == path_b[depth]:
            depth += 1
        return depth - 1, path_a[depth - 1]


def dedupe(reached: Iterable[tuple[str, Sequence[str]]]) -> tuple[dict[str, list[str]], dict[str, str]]:
    """Each service once, in the first reached node that holds it; returns groups and service -> node."""
    groups: dict[str, list[str]] = {}
    origin: dict[str, str] = {}
    for node_id, services in reached:
        fresh = [s for s in services if s not in origin]
        for service in fresh:
            origin[service] = node_id
        if fresh:
            groups.setdefault(node_id, []).extend(fresh)
    return groups, origin


def merge_small(groups: dict[str, list[str]], index: TreeIndex, threshold: int) -> dict[str, list[str]]:
    """Merge every group smaller than ``threshold`` into the group it shares the deepest ancestor with.

    Of all (small group, other group) pairs, the one with the deepest common ancestor merges first (ties: the
    smaller result, then tree order), so siblings join before cousins and the root gathers only what is left.
    The merged group is keyed by that ancestor and lists its parts' services in tree order of their nodes.
    """
    parts = {key: [key] for key in groups}
    size = {key: len(members) for key, members in groups.items()}
    while len(parts) > 1:
        best: tuple[int, int, int, int] | None = None
        pair: tuple[str, str, str] = ("", "", "")
        for key in parts:
            if size[key] >= threshold:
                continue
            for other in parts:
                if other == key:
                    continue
                depth, common = index.common_depth(key, other)
                rank = (-depth, size[key] + size[other], index.order[key], index.order[other])
                if best is None or rank < best:
                    best, pair = rank, (key, other, common)
        if best is None:
            break
        merged = set(pair) & set(parts)
        ancestor = pair[2]
        parts[ancestor] = sorted((p for k in merged for p in parts.pop(k)), key=index.order.__getitem__)
        size[ancestor] = sum(size.pop(k) for k in merged)
    return {key: [s for part in members for s in groups[part]] for key, members in parts.items()}


def split(key: str, services: Sequence[str], cap: int | None) -> list[Group]:
    """Near-equal parts of at most ``cap`` services (None: never split)."""
    if cap is None or len(services) <= cap:
        return [Group(key, list(services))]
    parts = -(-len(services) // cap)
    size, extra = divmod(len(services), parts)
    result, start = [], 0
    for part in range(parts):
        end = start + size + (1 if part < extra else 0)
        result.append(Group(key, list(services[start:end]), part + 1, parts))
        start = end
    return result


def tree_groups(reached: Iterable[tuple[str, Sequence[str]]], index: TreeIndex, *, threshold: int,
                cap: int | None) -> tuple[list[Group], dict[str, str]]:
    """The selection groups of one query's descent, in deterministic order, and where each service was found."""
    groups, origin = dedupe(reached)
    merged = merge_small(groups, index, threshold)
    ordered = sorted(merged, key=index.order.__getitem__)
    return [group for key in ordered for group in split(key, merged[key], cap)], origin


def extra_group(key: str, services: Sequence[str], exclude: Iterable[str], cap: int | None) -> list[Group]:
    """A group from outside the tree (retrieval results), without the services already offered."""
    seen = set(exclude)
    fresh = [s for s in dict.fromkeys(services) if s not in seen]
    return split(key, fresh, cap) if fresh else []
