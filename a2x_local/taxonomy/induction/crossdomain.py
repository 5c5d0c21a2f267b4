"""The cross-domain pass: services that also belong to another top-level domain get a second home there.

Two rounds for the whole tree: per leaf, which services also belong to another domain (at most a configured
number, offered as positions of the other domains); then per target domain, which of that domain's leaves takes
each one (only that domain's leaves are offered, with a confidence that must reach the threshold).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from a2x_local.llm import Engine, RegexConstraint, Request, Result, clip
from a2x_local.registry import Service
from a2x_local.taxonomy.config import BuildConfig
from a2x_local.taxonomy.induction.calls import Planned, fitted_request, fitting_chunks, numbered, service_line
from a2x_local.taxonomy.induction.schemas import (
    lines_budget,
    lines_regex,
    parse_lines,
    parse_placement,
    parse_positions,
    placement_item,
    positions_item,
)
from a2x_local.taxonomy.induction.state import BuildState
from a2x_local.taxonomy.types import Tree, TreeNode


def _brief(node: TreeNode, config: BuildConfig) -> str:
    return f"{node.name}: {clip(node.description, config.description_max_chars)}"


def pick_requests(state: BuildState, services: Mapping[str, Service], config: BuildConfig,
                  engine: Engine) -> Iterator[Planned]:
    """Per leaf, which of its services also belong to another domain; made as the round takes them."""
    tree = state.tree()
    domains = tree.root.children
    for leaf in tree.leaves():
        if leaf.id == state.root_id or not leaf.services:
            continue
        own = tree.path(leaf.id)[1]
        offered = [d for d in domains if d != own]
        item = positions_item(len(offered), config.cross_domain_max_extra)
        block = numbered([_brief(state.nodes[d], config) for d in offered])
        per_line = 6 + config.cross_domain_max_extra * (len(str(len(offered))) + 2)
        # The leaf's own identity (its path from the domain down, and what it holds), so the model judges the
        # services against where they already are.
        filed_under = (tree.path_names(leaf.id)
                       + f" ({clip(leaf.description, config.description_max_chars)})")

        def make(chunk: list[str], leaf: TreeNode = leaf, own: str = own, offered: list[str] = offered,
                 item: str = item, block: str = block, per_line: int = per_line,
                 filed_under: str = filed_under) -> Request | None:
            lines = [service_line(services[s], config.assign_description_chars) for s in chunk]
            return fitted_request(
                engine, config, "crossdomain_pick", constraint=RegexConstraint(lines_regex(len(chunk), item)),
                budget=lines_budget(len(chunk), per_line),
                context={"step": "crossdomain_pick", "leaf": leaf.id, "domain": own, "domains": offered,
                         "domain_names": [state.nodes[d].name for d in offered], "services": list(chunk)},
                user={"filed_under": filed_under, "domains": block, "services": numbered(lines)},
            )

        unfit: list[str] = []
        for chunk, request in fitting_chunks(leaf.services, config.cross_domain_batch_size, make, unfit,
                                             boundaries=config.batch_boundaries):
            yield Planned(request, leaf.id, tuple(chunk))
        state.count("cross_domain_unfit_services", len(unfit))


class PickRecorder:
    """Records (service, leaf, target domain) picks as answers come, each pair once; a failed answer means no extra
    domain (safe). The nodes do not change while picks are recorded, so one view of the tree serves the round."""

    def __init__(self, state: BuildState) -> None:
        self.state = state
        self.tree = state.tree()
        self.seen: set[tuple[str, str]] = set()

    def apply(self, plan: Planned, result: Result) -> None:
        state = self.state
        if not result.ok:
            state.count("cross_domain_pick_failed_services", len(plan.items))
            return
        offered = plan.request.context["domains"]
        for service_id, item in zip(plan.items, parse_lines(result.value, len(plan.items)), strict=True):
            for position in parse_positions(item)[: len(offered)]:
                target = offered[position - 1]
                if (service_id, target) in self.seen:
                    continue
                self.seen.add((service_id, target))
                if service_id in self.tree.subtree_services(target):
                    state.count("cross_domain_already_there")
                    continue
                state.cross_picks.append([service_id, plan.node, target])
                state.count("cross_domain_picked")


def place_requests(state: BuildState, services: Mapping[str, Service], config: BuildConfig,
                   engine: Engine) -> Iterator[Planned]:
    """Per target domain, which of its leaves takes each picked service; made as the round takes them."""
    by_domain: dict[str, list[str]] = {}
    for service_id, _leaf, target in state.cross_picks:     # each (service, target) once: see PickRecorder
        by_domain.setdefault(target, []).append(service_id)
    tree = state.tree()
    for target in sorted(by_domain, key=tree.root.children.index):
        leaves = [node for node in tree.walk(target) if node.is_leaf]
        item = placement_item(len(leaves))
        # Each leaf's path from the target domain (a child of the root) down.
        labels = [tree.path_names(leaf.id) for leaf in leaves]
        block = numbered([f"{label}: {clip(leaf.description, config.description_max_chars)}"
                          for label, leaf in zip(labels, leaves, strict=True)])
        per_line = 12 + len(str(len(leaves)))

        def make(chunk: list[str], target: str = target, leaves: list[TreeNode] = leaves, item: str = item,
                 block: str = block, per_line: int = per_line, labels: list[str] = labels) -> Request | None:
            lines = [service_line(services[s], config.assign_description_chars) for s in chunk]
            return fitted_request(
                engine, config, "crossdomain_place", constraint=RegexConstraint(lines_regex(len(chunk), item)),
                budget=lines_budget(len(chunk), per_line),
                context={"step": "crossdomain_place", "domain": target, "leaves": [leaf.id for leaf in leaves],
                         "leaf_names": labels, "services": list(chunk)},
                user={"domain": state.nodes[target].name, "categories": block, "services": numbered(lines)},
            )

        unfit: list[str] = []
        for chunk, request in fitting_chunks(by_domain[target], config.cross_domain_batch_size, make, unfit,
                                             boundaries=config.batch_boundaries):
            yield Planned(request, target, tuple(chunk))
        state.count("cross_domain_unfit_services", len(unfit))


def apply_place(plan: Planned, result: Result, config: BuildConfig, state: BuildState) -> None:
    """Add each confidently placed service to the chosen leaf of the target domain."""
    if not result.ok:
        state.count("cross_domain_place_failed_services", len(plan.items))
        return
    leaves = plan.request.context["leaves"]
    for service_id, item in zip(plan.items, parse_lines(result.value, len(plan.items)), strict=True):
        placement = parse_placement(item)
        if placement is None:
            state.count("cross_domain_declined")
            continue
        position, confidence = placement
        if confidence < config.cross_domain_min_confidence:
            state.count("cross_domain_low_confidence")
            continue
        leaf = state.nodes[leaves[position - 1]]
        if service_id not in leaf.services:
            leaf.services.append(service_id)
            state.count("cross_domain_added")


def leaves_over_limit(tree: Tree, config: BuildConfig) -> list[TreeNode]:
    """Leaves holding more than θ_leaf services (the build's re-check and a later re-split look for the same)."""
    return [leaf for leaf in tree.leaves() if len(leaf.services) > config.leaf_max_services]


def overfull_leaves(state: BuildState, config: BuildConfig) -> list[str]:
    """Leaves above θ_leaf that may still be split (depth < D): the re-check after the cross-domain pass."""
    return [leaf.id for leaf in leaves_over_limit(state.tree(), config)
            if leaf.id != state.root_id and leaf.depth < config.max_depth]
