"""Turning a node's last assignment into children: generic and unassigned services stay on the node, tiny
categories are deleted with their services moved up, ids come from code, large children go to the next level."""

from __future__ import annotations

from a2x_local.taxonomy.config import BuildConfig
from a2x_local.taxonomy.induction.state import UNSPLIT, BuildState, NodeWork
from a2x_local.taxonomy.types import TreeNode, child_id


def finalise(state: BuildState, work: NodeWork, config: BuildConfig) -> list[str]:
    """Create the node's children; return the ids of those that must be split at the next level."""
    node = state.nodes[work.node_id]
    if work.status == UNSPLIT or not work.drafts:
        state.count("nodes_left_unsplit")
        return []
    limit = config.generic_limit(len(work.drafts))
    failed = set(work.failed)
    members: list[list[str]] = [[] for _ in work.drafts]
    own: list[str] = []
    for service_id in work.services:
        positions = work.assignment.get(service_id)
        if service_id in failed or positions is None:
            state.count("services_unclassified_on_node")
            own.append(service_id)
        elif not positions:
            state.count("unassigned_on_node")
            own.append(service_id)
        elif len(positions) > limit:
            state.count("generic_on_node")
            own.append(service_id)
        else:
            for position in positions:
                members[position - 1].append(service_id)
    survivors = [k for k, m in enumerate(members) if len(m) > config.tiny_category_max]
    placed = {s for k in survivors for s in members[k]}
    moved = {s for k, m in enumerate(members) if k not in survivors for s in m} - placed
    state.count("tiny_categories_deleted", len(members) - len(survivors))
    state.count("services_moved_up", len(moved))
    if not survivors:
        state.count("nodes_left_unsplit")
        work.note = work.note or "every category was tiny"
        return []
    owned = set(own) | moved
    node.services = [s for s in work.services if s in owned]
    node.children = []
    enqueue = []
    for position, k in enumerate(survivors, start=1):
        draft = work.drafts[k]
        child = TreeNode(child_id(node.id, position), node.id, node.depth + 1, draft.name, draft.description,
                         draft.boundary, draft.decision_rule, list(draft.keywords), services=members[k])
        state.nodes[child.id] = child
        node.children.append(child.id)
        if len(child.services) > config.leaf_max_services and child.depth < config.max_depth:
            enqueue.append(child.id)
    return enqueue
