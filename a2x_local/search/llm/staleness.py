"""A stale tree keeps serving: searches walk it without the services the registry no longer has, and say how many
registry services it does not place (those only a rebuild, or `a2x+rescue`'s retrieval group, can find)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from a2x_local.taxonomy import Tree


@dataclass(frozen=True)
class Staleness:
    """How the active tree differs from the registry it now serves."""

    tree: int | None
    missing: int          # services the tree files that the registry no longer holds (skipped)
    unplaced: int         # registry services the tree does not file anywhere (descent cannot reach them)

    @property
    def warning(self) -> str:
        parts = []
        if self.unplaced:
            parts.append(f"{self.unplaced:,} registry service(s) are not placed in it")
        if self.missing:
            parts.append(f"{self.missing:,} service(s) it files are gone from the registry and are skipped")
        if not parts:
            parts.append("service descriptions changed since it was built")
        return (f"the active tree (id {self.tree}) is stale: " + "; ".join(parts)
                + "; rebuild it with `a2x-local build` (a2x+rescue also searches the unplaced ones by retrieval)")

    def to_dict(self) -> dict[str, Any]:
        return {"tree": self.tree, "missing": self.missing, "unplaced": self.unplaced, "warning": self.warning}


def serving_tree(tree: Tree, service_ids: set[str], fingerprint: str) -> tuple[Tree, Staleness | None]:
    """The tree as it can serve this registry: unchanged when current, else without the services that are gone."""
    if tree.registry_fingerprint == fingerprint:
        return tree, None
    placed = tree.service_ids()
    gone = placed - service_ids
    staleness = Staleness(tree.build_id, len(gone), len(service_ids - placed))
    if not gone:
        return tree, staleness
    return tree.without_services(gone), staleness
