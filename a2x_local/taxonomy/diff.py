"""What changed between two trees: categories added, removed or renamed, services that moved, appeared or vanished.

Node ids are positions (`root/3/2`) and mean nothing across two builds, so categories are matched top-down by
path and name: the roots match; under two matched parents, children with the same name (case and spacing aside)
match; children still unmatched there are paired as *renamed* when they hold mostly the same services (Jaccard of
their subtrees' services at least ``RENAME_OVERLAP``). A service *moved* when the categories holding it differ
once the matching is applied.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from a2x_local.taxonomy.types import Tree

RENAME_OVERLAP = 0.5


def _norm(name: str) -> str:
    return " ".join(name.lower().split())


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    union = len(a | b)
    return len(a & b) / union if union else 0.0


def node_path(tree: Tree, node_id: str) -> str:
    """The category's names from the top level down (the root is shown as its own name)."""
    return tree.path_names(node_id) or tree.nodes[node_id].name


@dataclass
class TreeDiff:
    a: int | None
    b: int | None
    categories_added: list[dict[str, str]] = field(default_factory=list)
    categories_removed: list[dict[str, str]] = field(default_factory=list)
    categories_renamed: list[dict[str, Any]] = field(default_factory=list)
    categories_kept: int = 0
    services_appeared: list[str] = field(default_factory=list)
    services_vanished: list[str] = field(default_factory=list)
    services_moved: list[dict[str, Any]] = field(default_factory=list)
    services_kept: int = 0

    def counts(self) -> dict[str, int]:
        return {"categories_added": len(self.categories_added), "categories_removed": len(self.categories_removed),
                "categories_renamed": len(self.categories_renamed), "categories_kept": self.categories_kept,
                "services_appeared": len(self.services_appeared), "services_vanished": len(self.services_vanished),
                "services_moved": len(self.services_moved), "services_kept": self.services_kept}

    @property
    def identical(self) -> bool:
        counts = self.counts()
        return not any(v for k, v in counts.items() if not k.endswith("_kept"))

    def to_dict(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "counts": self.counts(), "identical": self.identical,
                "categories": {"added": self.categories_added, "removed": self.categories_removed,
                               "renamed": self.categories_renamed},
                "services": {"appeared": self.services_appeared, "vanished": self.services_vanished,
                             "moved": self.services_moved}}


def match_categories(a: Tree, b: Tree) -> tuple[dict[str, str], set[str]]:
    """A's node id -> B's node id for every matched category, and the A ids matched as renamed."""
    matched = {a.root_id: b.root_id}
    renamed: set[str] = set()
    pending = [a.root_id]
    while pending:
        node_a = pending.pop(0)
        node_b = matched[node_a]
        free_b = list(b.nodes[node_b].children)
        unmatched_a = []
        for child in a.nodes[node_a].children:
            name = _norm(a.nodes[child].name)
            same = next((c for c in free_b if _norm(b.nodes[c].name) == name), None)
            if same is None:
                unmatched_a.append(child)
            else:
                matched[child] = same
                free_b.remove(same)
                pending.append(child)
        pairs = sorted(((_jaccard(a.subtree_services(x), b.subtree_services(y)), x, y)
                        for x in unmatched_a for y in free_b), key=lambda p: (-p[0], p[1], p[2]))
        for overlap, x, y in pairs:
            if overlap < RENAME_OVERLAP:
                break
            if x in matched or y not in free_b:
                continue
            matched[x] = y
            renamed.add(x)
            free_b.remove(y)
            pending.append(x)
    return matched, renamed


def _placements(tree: Tree) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for node in tree.walk():
        for service in node.services:
            found.setdefault(service, set()).add(node.id)
    return found


def diff_trees(a: Tree, b: Tree) -> TreeDiff:
    """How ``b`` differs from ``a`` (lists in tree order of the tree that has them)."""
    matched, renamed = match_categories(a, b)
    reached_b = set(matched.values())
    diff = TreeDiff(a.build_id, b.build_id)
    for node in a.walk():
        if node.id == a.root_id:
            continue
        if node.id not in matched:
            diff.categories_removed.append({"id": node.id, "path": node_path(a, node.id)})
        elif node.id in renamed:
            diff.categories_renamed.append({"a_id": node.id, "b_id": matched[node.id], "from": node_path(a, node.id),
                                            "to": node_path(b, matched[node.id])})
        else:
            diff.categories_kept += 1
    diff.categories_added = [{"id": node.id, "path": node_path(b, node.id)} for node in b.walk()
                             if node.id != b.root_id and node.id not in reached_b]
    in_a, in_b = _placements(a), _placements(b)
    diff.services_vanished = sorted(set(in_a) - set(in_b))
    diff.services_appeared = sorted(set(in_b) - set(in_a))
    for service in sorted(set(in_a) & set(in_b)):
        mapped = {matched.get(node, f"a:{node}") for node in in_a[service]}
        if mapped == in_b[service]:
            diff.services_kept += 1
            continue
        diff.services_moved.append({
            "service": service,
            "from": sorted(node_path(a, node) for node in in_a[service]),
            "to": sorted(node_path(b, node) for node in in_b[service]),
        })
    return diff
