"""Assigning services to a node's designed categories, many services per request.

The category list is the shared prefix of every request about a node and the numbered services come last, so
one request files 10–20 services for a few hundred prompt tokens each instead of one request per service. The
answer is one line per service with category positions or NONE, bounded by the number of categories.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from a2x_local.llm import Engine, RegexConstraint, Request, Result
from a2x_local.registry import Service
from a2x_local.taxonomy.calls import Planned, category_block, fit_chunks, fitted_request, numbered, service_line
from a2x_local.taxonomy.config import BuildConfig
from a2x_local.taxonomy.schemas import lines_budget, lines_regex, parse_lines, parse_positions, positions_item
from a2x_local.taxonomy.state import DONE, REFINE, BuildState, NodeWork


def max_labels(config: BuildConfig, categories: int) -> int:
    """Positions one answer line may list: one more than the generic limit is enough to detect a generic."""
    return min(categories, config.generic_limit(categories) + 1)


def assign_requests(works: Sequence[NodeWork], services: Mapping[str, Service], config: BuildConfig,
                    engine: Engine, state: BuildState) -> list[Planned]:
    planned: list[Planned] = []
    for work in works:
        count = len(work.drafts)
        most = max_labels(config, count)
        item = positions_item(count, most)
        per_line = 6 + most * (len(str(count)) + 2)
        block = category_block(work.drafts)
        names = [d.name for d in work.drafts]
        keywords = [d.keywords for d in work.drafts]

        def make(chunk: list[str], work: NodeWork = work, item: str = item, per_line: int = per_line,
                 block: str = block, names: list[str] = names, keywords: list = keywords,
                 most: int = most) -> Request | None:
            lines = [service_line(services[s], config.assign_description_chars) for s in chunk]
            return fitted_request(
                engine, config, "assign", constraint=RegexConstraint(lines_regex(len(chunk), item)),
                budget=lines_budget(len(chunk), per_line),
                context={"step": "assign", "node": work.node_id, "pass": work.passes + 1, "categories": names,
                         "max_labels": most,
                         "category_keywords": keywords, "services": list(chunk)},
                user={"node_path": work.path, "categories": block, "services": numbered(lines)},
            )

        pairs, unfit = fit_chunks(work.pending, config.assign_batch_size, make, boundaries=config.batch_boundaries)
        if unfit:
            state.count("assign_unfit_services", len(unfit))
            work.failed.extend(unfit)
        planned.extend(Planned(request, work.node_id, tuple(chunk)) for chunk, request in pairs)
        work.pending = []
    return planned


def apply_assign(work: NodeWork, plan: Planned, result: Result, state: BuildState) -> None:
    """An assignment that stayed invalid leaves its services unclassified: they stay on the node."""
    if not result.ok:
        state.count("assign_failed_services", len(plan.items))
        work.failed.extend(plan.items)
        for service_id in plan.items:
            work.assignment.pop(service_id, None)
        return
    for service_id, item in zip(plan.items, parse_lines(result.value, len(plan.items)), strict=True):
        work.assignment[service_id] = parse_positions(item)


def problems(work: NodeWork, config: BuildConfig) -> tuple[list[str], list[str]]:
    """(generic, unassigned) services of the node, in the node's order."""
    limit = config.generic_limit(len(work.drafts))
    generic, unassigned = [], []
    for service_id in work.services:
        positions = work.assignment.get(service_id)
        if positions is None:
            continue
        if not positions:
            unassigned.append(service_id)
        elif len(positions) > limit:
            generic.append(service_id)
    return generic, unassigned


def after_pass(work: NodeWork, config: BuildConfig) -> None:
    """One assignment pass done: refine while problems remain and passes are left."""
    work.passes += 1
    generic, unassigned = problems(work, config)
    work.status = REFINE if (generic or unassigned) and work.passes < config.refine_passes else DONE
