"""Candidate groups for service selection, in one of three layouts (`[search] group_lists`).

- "merged" (the published method): de-duplicated, and small groups merged by their deepest common ancestor in the
  tree (siblings first, cousins next), which keeps related services in one prompt and saves the fixed cost of a
  call. Which groups merge depends on what the query reached, so two queries rarely send the same list.
- "stable": merged the same way, but every node's list stays whole (a service reached twice is offered twice, in
  each of its lists): a merged list begins with its first node's whole list, a prefix other queries share.
- "per_node": each reached node's own list, whole, never merged: a list that depends only on the tree, so every
  query that reaches the node sends the same tokens before its request, and an engine's prefix cache computes them
  once. More, shorter selection calls; a service reached on two nodes is offered in both.
Any group above the cap is split into near-equal parts so no selection prompt outgrows the budget. Order is
deterministic: tree pre-order of the group's node, then part number; the order of services inside a group is the
order they were reached in (tree order).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from a2x_local.taxonomy import Tree

RESCUE_KEY = "rescue"
RETRIEVED_KEY = "retrieved"


@dataclass
class Group:
    """Services shown together in one selection prompt. ``key`` is the tree node the group covers (or a tag).

    Pre-ranking sets the other two: ``held`` are services kept back, offered only if the query's answers choose
    nothing; ``brief`` counts the last services of the list shown by name alone.
    """

    key: str
    services: list[str]
    part: int = 1
    parts: int = 1
    held: list[str] = field(default_factory=list)
    brief: int = 0

    def to_dict(self) -> dict[str, object]:
        return {"key": self.key, "part": self.part, "parts": self.parts, "services": list(self.services),
                "held_back": len(self.held), "by_name": self.brief}

    def halves(self) -> tuple[Group, Group]:
        """The group cut in two (a prompt over budget); the services shown by name stay the last ones."""
        half, n = len(self.services) // 2, len(self.services)
        first_brief = max(0, half - (n - self.brief))
        return (Group(self.key, self.services[:half], self.part, self.parts, brief=first_brief),
                Group(self.key, self.services[half:], self.part, self.parts, brief=self.brief - first_brief))

    def rest(self) -> Group:
        """The held-back services as a group of their own (same key and part)."""
        return Group(self.key, list(self.held), self.part, self.parts)


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


def dedupe(reached: Iterable[tuple[str, Sequence[str]]], *,
           whole: bool = False) -> tuple[dict[str, list[str]], dict[str, str]]:
    """Each service once, in the first reached node that holds it; returns groups and service -> node. ``whole``
    keeps every node's list whole instead (a service on two reached nodes in both); the origin is still the first."""
    groups: dict[str, list[str]] = {}
    origin: dict[str, str] = {}
    for node_id, services in reached:
        fresh = [s for s in services if s not in origin]
        for service in fresh:
            origin[service] = node_id
        listed = services if whole else fresh
        if listed:
            groups.setdefault(node_id, []).extend(listed)
    return groups, origin


def merge_small(groups: dict[str, list[str]], index: TreeIndex, threshold: int) -> dict[str, list[str]]:
    """Merge every group smaller than ``threshold`` into the group it shares the deepest ancestor with.

    Of all (small group, other group) pairs, the one with the deepest common ancestor merges first (ties: the
    smaller result, then tree order), so siblings join before cousins and the root gathers only what is left.
    The merged group is keyed by that ancestor (absorbing the ancestor's own group) and lists its parts' services
    in tree order of their nodes. Merging stops when one group is left or every group reaches the threshold.

    Computed bottom-up, one tree node at a time, deepest first: every pair whose deepest common ancestor is node A
    is a pair of groups under A, and merging them changes nothing outside A's subtree, so the nodes of one depth
    are independent. Under A the pair of least (size, tree order) merges first, which is the two smallest groups
    (a heap), until the groups under A are one or all big enough; what is left moves up to A's parent.
    O(g log g) per node for its g groups, instead of the cubic pairwise search it replaces.
    """
    members = {key: [key] for key in groups}
    size = {key: len(services) for key, services in groups.items()}
    if len(groups) > 1 and any(n < threshold for n in size.values()):
        pending: dict[str, list[str]] = {}
        for key in groups:
            pending.setdefault(key, []).append(key)
            for node in index.paths[key]:
                pending.setdefault(node, [])
        remaining: list[str] = []
        for node in sorted(pending, key=lambda n: -len(index.paths[n])):
            here = pending.pop(node)
            if len(here) > 1 and any(size[key] < threshold for key in here):
                here = _merge_under(node, here, members, size, index, threshold)
            path = index.paths[node]
            (pending[path[-2]] if len(path) > 1 else remaining).extend(here)
    else:
        remaining = list(groups)
    return {key: list(dict.fromkeys(s for part in sorted(members[key], key=index.order.__getitem__)
                                    for s in groups[part]))
            for key in sorted(remaining, key=index.order.__getitem__)}


def _merge_under(node: str, keys: list[str], members: dict[str, list[str]], size: dict[str, int],
                 index: TreeIndex, threshold: int) -> list[str]:
    """Merge the two smallest groups under ``node`` (and ``node``'s own group) into ``node``'s group while one is
    small; the groups left. ``members`` and ``size`` are updated in place."""
    alive = set(keys)
    version = dict.fromkeys(keys, 0)
    heap = [(size[key], index.order[key], key, 0) for key in keys]
    heapq.heapify(heap)

    def smallest() -> str:
        while True:
            _, _, key, seen = heapq.heappop(heap)
            if key in alive and version[key] == seen:
                return key

    while len(alive) > 1:
        first = smallest()
        if size[first] >= threshold:
            break
        second = smallest()
        merged = {first, second, node} & alive
        parts = [part for key in merged for part in members.pop(key)]
        total = sum(size.pop(key) for key in merged)
        alive -= merged
        alive.add(node)
        members[node], size[node] = parts, total
        version[node] = version.get(node, 0) + 1
        heapq.heappush(heap, (total, index.order[node], node, version[node]))
    return sorted(alive, key=index.order.__getitem__)


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
                cap: int | None, lists: str = "merged") -> tuple[list[Group], dict[str, str]]:
    """The selection groups of one query's descent in the layout ``lists`` (see the module), in deterministic
    order, and where each service was found."""
    groups, origin = dedupe(reached, whole=lists != "merged")
    merged = groups if lists == "per_node" else merge_small(groups, index, threshold)
    ordered = sorted(merged, key=index.order.__getitem__)
    return [group for key in ordered for group in split(key, merged[key], cap)], origin


def pack(groups: Sequence[Group], cap: int) -> list[Group]:
    """One query's groups joined into as few lists as hold at most ``cap`` services each (first fit, largest
    first): every selection call repeats the instructions and the request, so two lists of 25 cost more than one
    of 50. Split parts and tagged groups (the rescue) stay as they are; a pack's key joins its groups' keys, and a
    pack keeps its groups in their order and takes the place of its first."""
    packable = [i for i, g in enumerate(groups) if g.parts == 1 and g.key != RESCUE_KEY]
    packs: list[list[int]] = []
    sizes: list[int] = []
    for i in sorted(packable, key=lambda i: -len(groups[i].services)):
        size = len(groups[i].services)
        home = next((p for p, used in enumerate(sizes) if used + size <= cap), None)
        if home is None:
            packs.append([i])
            sizes.append(size)
        else:
            packs[home].append(i)
            sizes[home] += size
    joined = {min(members): Group("+".join(groups[i].key for i in sorted(members)),
                                  [s for i in sorted(members) for s in groups[i].services]) for members in packs}
    taken = set(packable)
    return [joined.get(i, group) for i, group in enumerate(groups) if i in joined or i not in taken]


def extra_group(key: str, services: Sequence[str], exclude: Iterable[str], cap: int | None) -> list[Group]:
    """A group from outside the tree (retrieval results), without the services already offered."""
    seen = set(exclude)
    fresh = [s for s in dict.fromkeys(services) if s not in seen]
    return split(key, fresh, cap) if fresh else []


def path_group(reached: Iterable[tuple[str, Sequence[str]]], index: TreeIndex, extra: Sequence[str],
               cap: int | None) -> tuple[list[Group], dict[str, str]]:
    """get_one's candidates as one list: a single path's services in tree order, then ``extra`` (retrieval
    results not reached), split only when longer than ``cap``. Keyed by the deepest node every reached node lies
    under. Returns the groups and where each tree service was found."""
    groups, origin = dedupe(reached)
    ordered = sorted(groups, key=index.order.__getitem__)
    services = [s for key in ordered for s in groups[key]]
    services += [s for s in dict.fromkeys(extra) if s not in origin]
    if not services:
        return [], origin
    key = ordered[0] if ordered else RESCUE_KEY
    for other in ordered[1:]:
        key = index.common_depth(key, other)[1]
    return split(key, services, cap), origin
