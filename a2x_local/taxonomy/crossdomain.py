"""The cross-domain pass: services that also belong to another top-level domain get a second home there.

Two rounds for the whole tree: per leaf, which services also belong to another domain (at most a configured
number, offered as positions of the other domains); then per target domain, which of that domain's leaves takes
each one (only that domain's leaves are offered, with a confidence that must reach the threshold).
"""

from __future__ import annotations

from collections.abc import Mapping

from a2x_local.llm.base import Engine
from a2x_local.llm.types import RegexConstraint, Request, Result
from a2x_local.registry.types import Service
from a2x_local.taxonomy.calls import Planned, clip, fit_chunks, fitted_request, numbered, service_line
from a2x_local.taxonomy.config import BuildConfig
from a2x_local.taxonomy.schemas import (
    lines_budget,
    lines_regex,
    parse_lines,
    parse_placement,
    parse_positions,
    placement_item,
    positions_item,
)
from a2x_local.taxonomy.state import BuildState
from a2x_local.taxonomy.types import TreeNode


def _domain(state: BuildState, node_id: str) -> str:
    """The top-level ancestor (a child of the root) of a node below the root."""
    current = node_id
    while state.nodes[current].parent != state.root_id:
        current = state.nodes[current].parent
    return current


def _leaves(state: BuildState, start: str) -> list[TreeNode]:
    stack, leaves = [start], []
    while stack:
        node = state.nodes[stack.pop()]
        if node.children:
            stack.extend(reversed(node.children))
        else:
            leaves.append(node)
    return leaves


def _subtree_services(state: BuildState, start: str) -> set[str]:
    stack, found = [start], set()
    while stack:
        node = state.nodes[stack.pop()]
        found.update(node.services)
        stack.extend(node.children)
    return found


def _brief(node: TreeNode, config: BuildConfig) -> str:
    return f"{node.name}: {clip(node.description, config.description_max_chars)}"


def pick_requests(state: BuildState, services: Mapping[str, Service], config: BuildConfig,
                  engine: Engine) -> list[Planned]:
    domains = state.nodes[state.root_id].children
    planned: list[Planned] = []
    for leaf in _leaves(state, state.root_id):
        if leaf.id == state.root_id or not leaf.services:
            continue
        own = _domain(state, leaf.id)
        offered = [d for d in domains if d != own]
        item = positions_item(len(offered), config.cross_domain_max_extra)
        block = numbered([_brief(state.nodes[d], config) for d in offered])
        per_line = 6 + config.cross_domain_max_extra * (len(str(len(offered))) + 2)

        def make(chunk: list[str], leaf: TreeNode = leaf, own: str = own, offered: list[str] = offered,
                 item: str = item, block: str = block, per_line: int = per_line) -> Request | None:
            lines = [service_line(services[s], config.assign_description_chars) for s in chunk]
            return fitted_request(
                engine, config, "crossdomain_pick", constraint=RegexConstraint(lines_regex(len(chunk), item)),
                budget=lines_budget(len(chunk), per_line),
                context={"step": "crossdomain_pick", "leaf": leaf.id, "domain": own, "domains": offered,
                         "domain_names": [state.nodes[d].name for d in offered], "services": list(chunk)},
                user={"domain": state.nodes[own].name, "domains": block, "services": numbered(lines)},
            )

        pairs, unfit = fit_chunks(leaf.services, config.cross_domain_batch_size, make)
        state.count("cross_domain_unfit_services", len(unfit))
        planned.extend(Planned(request, leaf.id, tuple(chunk)) for chunk, request in pairs)
    return planned


def apply_pick(plan: Planned, result: Result, state: BuildState, memo: dict) -> None:
    """Record (service, leaf, target domain) picks; a failed answer means no extra domain (safe).

    ``memo`` is shared by the results of one round: picks already seen and each domain's services.
    """
    if not result.ok:
        state.count("cross_domain_pick_failed_services", len(plan.items))
        return
    offered = plan.request.context["domains"]
    for service_id, item in zip(plan.items, parse_lines(result.value, len(plan.items)), strict=True):
        for position in parse_positions(item)[: len(offered)]:
            target = offered[position - 1]
            seen = memo.setdefault("seen", set())
            if (service_id, target) in seen:
                continue
            seen.add((service_id, target))
            if target not in memo:
                memo[target] = _subtree_services(state, target)
            if service_id in memo[target]:
                state.count("cross_domain_already_there")
                continue
            state.cross_picks.append([service_id, plan.node, target])
            state.count("cross_domain_picked")


def place_requests(state: BuildState, services: Mapping[str, Service], config: BuildConfig,
                   engine: Engine) -> list[Planned]:
    by_domain: dict[str, list[str]] = {}
    for service_id, _leaf, target in state.cross_picks:
        wanted = by_domain.setdefault(target, [])
        if service_id not in wanted:
            wanted.append(service_id)
    planned: list[Planned] = []
    for target in sorted(by_domain, key=lambda d: state.nodes[state.root_id].children.index(d)):
        leaves = _leaves(state, target)
        item = placement_item(len(leaves))
        labels = [" › ".join(state.nodes[n].name for n in _path_below(state, target, leaf.id)) for leaf in leaves]
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

        pairs, unfit = fit_chunks(by_domain[target], config.cross_domain_batch_size, make)
        state.count("cross_domain_unfit_services", len(unfit))
        planned.extend(Planned(request, target, tuple(chunk)) for chunk, request in pairs)
    return planned


def _path_below(state: BuildState, top: str, node_id: str) -> list[str]:
    path = [node_id]
    while path[-1] != top:
        path.append(state.nodes[path[-1]].parent)
    return path[::-1]


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


def overfull_leaves(state: BuildState, config: BuildConfig) -> list[str]:
    """Leaves above θ_leaf that may still be split (depth < D): the re-check after the cross-domain pass."""
    return [leaf.id for leaf in _leaves(state, state.root_id)
            if leaf.id != state.root_id and leaf.depth < config.max_depth
            and len(leaf.services) > config.leaf_max_services]
