"""Splitting chosen nodes of an existing tree with the build's own steps, leaving the rest of the tree as it is.

After incremental placement some leaves hold more than θ_leaf services. Rebuilding the whole tree for them would
throw away every other category; instead the same level-synchronous steps a build runs (design, validate,
assign, refine, finalise, and the next level for children still too large) run for just those nodes, all of them
together in each engine round, and the new children get ids under their parent as in a build.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from a2x_local.llm import Engine
from a2x_local.registry import Service
from a2x_local.taxonomy.config import BuildConfig
from a2x_local.taxonomy.induction.builder import BuildAborted, Builder, RoundObserver
from a2x_local.taxonomy.induction.crossdomain import leaves_over_limit
from a2x_local.taxonomy.induction.keywords import require_embedding
from a2x_local.taxonomy.induction.language import with_category_language
from a2x_local.taxonomy.induction.state import BuildState
from a2x_local.taxonomy.types import Tree


@dataclass
class ResplitOutcome:
    """The new tree, which of the asked nodes now have children, and what the rounds cost."""

    tree: Tree
    split: list[str]
    unsplit: list[str]
    rounds: list[dict[str, Any]] = field(default_factory=list)
    counters: dict[str, int] = field(default_factory=dict)
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"split": self.split, "unsplit": self.unsplit, "steps": len(self.rounds), "rounds": self.rounds,
                "counters": self.counters, "error": self.error}


def overfull_leaves(tree: Tree, config: BuildConfig) -> list[dict[str, Any]]:
    """Leaves holding more than θ_leaf services, largest first; ``splittable`` when above them the depth allows it."""
    found = [{"node": leaf.id, "name": leaf.name, "depth": leaf.depth, "services": len(leaf.services),
              "splittable": leaf.depth < config.max_depth} for leaf in leaves_over_limit(tree, config)]
    return sorted(found, key=lambda item: (-item["services"], item["node"]))


def resplit_nodes(tree: Tree, services: Mapping[str, Service], config: BuildConfig, engine: Engine,
                  nodes: Sequence[str], *, observer: RoundObserver | None = None) -> ResplitOutcome:
    """Split ``nodes`` (leaves over θ_leaf, above the depth limit) of a copy of ``tree``; ``tree`` is unchanged.

    When too many answers of a round stay invalid (the build would abort), the tree comes back unsplit with the
    error: the caller keeps what it had (placed services in over-full leaves) rather than losing it.
    """
    unknown = [node for node in nodes if node not in tree.nodes]
    if unknown:
        raise ValueError(f"nodes not in the tree: {unknown}")
    require_embedding(config)
    config = with_category_language(config, list(services.values()))
    queue = sorted(dict.fromkeys(nodes))
    state = BuildState(nodes=copy.deepcopy(tree.nodes), root_id=tree.root_id, queue=queue, cross_done=True,
                       level=min((tree.nodes[n].depth for n in queue), default=0))
    builder = Builder(state, services, config, engine, observer)
    try:
        while not builder.finished:
            builder.step()
    except BuildAborted as exc:
        return ResplitOutcome(tree, [], queue, state.rounds, dict(sorted(state.counters.items())), exc.message)
    result = state.tree(tree.registry_fingerprint)
    split = [node for node in queue if result.nodes[node].children]
    return ResplitOutcome(result, split, [node for node in queue if node not in split], state.rounds,
                          dict(sorted(state.counters.items())))
