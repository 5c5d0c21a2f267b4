"""Assigning services to a node's designed categories: every category that fits, not one per service.

Batched (the default): the category list is the shared prefix of every request about a node and the numbered
services come last, so one request files 10–20 services for a few hundred prompt tokens each; the answer is one
line per service with category positions or NONE, bounded by the number of categories. Per service (for
comparison with the published implementation): one request per service whose answer gives a short reasoning
sentence before the positions. After a refine added categories, the services under unchanged ones are offered the
new ones in the same round (``assign_new``), so no service misses a category that appeared after it was filed.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from a2x_local.llm import Engine, RegexConstraint, Request, Result
from a2x_local.registry import Service
from a2x_local.taxonomy.config import BuildConfig
from a2x_local.taxonomy.induction.calls import (
    Planned,
    category_block,
    fitted_request,
    fitting_chunks,
    numbered,
    service_line,
)
from a2x_local.taxonomy.induction.schemas import lines_budget, lines_regex, parse_lines, parse_positions, positions_item
from a2x_local.taxonomy.induction.state import DONE, REFINE, BuildState, Draft, NodeWork

ASSIGN, ASSIGN_ONE, ASSIGN_NEW = "assign", "assign_one", "assign_new"


def max_labels(config: BuildConfig, categories: int) -> int:
    """Positions one answer line may list: one more than the generic limit is enough to detect a generic."""
    return min(categories, config.generic_limit(categories) + 1)


def one_regex(config: BuildConfig, item: str) -> str:
    """A per-service answer: a reasoning line (no newline, bounded), then the categories line."""
    return f"Reasoning: [^\\n]{{1,{config.assign_reasoning_chars}}}\\nCategories: {item}"


def _batched(work: NodeWork, drafts: Sequence[Draft], positions: Sequence[int], items: list[str],
             services: Mapping[str, Service], config: BuildConfig, engine: Engine, step: str,
             unfit: list[str]) -> Iterator[Planned]:
    """Line-per-service requests over ``items`` against ``drafts`` (whose positions in the node are ``positions``),
    made one at a time; the items whose prompt cannot fit even alone go to ``unfit``."""
    count = len(drafts)
    most = max_labels(config, len(work.drafts)) if step == ASSIGN else count
    item = positions_item(count, most)
    per_line = 6 + most * (len(str(count)) + 2)
    block = category_block(drafts)

    def make(chunk: list[str]) -> Request | None:
        lines = [service_line(services[s], config.assign_description_chars) for s in chunk]
        return fitted_request(
            engine, config, step, constraint=RegexConstraint(lines_regex(len(chunk), item)),
            budget=lines_budget(len(chunk), per_line),
            context={"step": step, "node": work.node_id, "pass": work.passes + 1,
                     "categories": [d.name for d in drafts], "positions": list(positions), "max_labels": most,
                     "category_keywords": [d.keywords for d in drafts], "services": list(chunk)},
            user={"node_path": work.path, "categories": block, "services": numbered(lines)},
        )

    for chunk, request in fitting_chunks(items, config.assign_batch_size, make, unfit,
                                         boundaries=config.batch_boundaries):
        yield Planned(request, work.node_id, tuple(chunk))


def _one_by_one(work: NodeWork, items: list[str], services: Mapping[str, Service], config: BuildConfig,
                engine: Engine, unfit: list[str]) -> Iterator[Planned]:
    count = len(work.drafts)
    most = max_labels(config, count)
    constraint = RegexConstraint(one_regex(config, positions_item(count, most)))
    budget = int((config.assign_reasoning_chars + 30 + most * (len(str(count)) + 2)) / config.budget_chars_per_token
                 ) + 8
    block = category_block(work.drafts)
    for service_id in items:
        request = fitted_request(
            engine, config, ASSIGN_ONE, constraint=constraint, budget=budget,
            context={"step": ASSIGN_ONE, "node": work.node_id, "pass": work.passes + 1,
                     "categories": [d.name for d in work.drafts], "positions": list(range(1, count + 1)),
                     "max_labels": most, "category_keywords": [d.keywords for d in work.drafts],
                     "services": [service_id]},
            user={"node_path": work.path, "categories": block,
                  "service": service_line(services[service_id], config.assign_description_chars)},
        )
        if request is None:
            unfit.append(service_id)
        else:
            yield Planned(request, work.node_id, (service_id,))


def assign_requests(works: Sequence[NodeWork], services: Mapping[str, Service], config: BuildConfig,
                    engine: Engine, state: BuildState) -> Iterator[Planned]:
    """The requests of one assignment round for every node, made as the round takes them; services whose prompt
    cannot fit stay unclassified."""
    for work in works:
        count = len(work.drafts)
        unfit: list[str] = []
        if config.assign_mode == "per_service":
            yield from _one_by_one(work, work.pending, services, config, engine, unfit)
        else:
            yield from _batched(work, work.drafts, range(1, count + 1), work.pending, services, config, engine,
                                ASSIGN, unfit)
        if unfit:
            state.count("assign_unfit_services", len(unfit))
            work.failed.extend(unfit)
        if work.offer_new and work.new_positions:
            drafts = [work.drafts[p - 1] for p in work.new_positions]
            unoffered: list[str] = []
            yield from _batched(work, drafts, work.new_positions, work.offer_new, services, config, engine,
                                ASSIGN_NEW, unoffered)
            state.count("services_offered_new_categories", len(work.offer_new) - len(unoffered))
            state.count("assign_new_unfit_services", len(unoffered))
        work.pending = []
        work.offer_new, work.new_positions = [], []


def apply_assign(work: NodeWork, plan: Planned, result: Result, state: BuildState) -> None:
    """An assignment that stayed invalid leaves its services unclassified: they stay on the node. An offer of new
    categories that stayed invalid leaves its services where they were."""
    step = plan.request.context["step"]
    if not result.ok:
        state.count(f"{step}_failed_services", len(plan.items))
        if step != ASSIGN_NEW:
            work.failed.extend(plan.items)
            for service_id in plan.items:
                work.assignment.pop(service_id, None)
        return
    if step == ASSIGN_ONE:
        answers = [result.value.rsplit("\nCategories: ", 1)[1].strip()]
    else:
        answers = parse_lines(result.value, len(plan.items))
    positions = plan.request.context["positions"]
    for service_id, item in zip(plan.items, answers, strict=True):
        chosen = [positions[p - 1] for p in parse_positions(item)]
        if step == ASSIGN_NEW:
            added = [p for p in chosen if p not in work.assignment.get(service_id, [])]
            if added and service_id in work.assignment:
                work.assignment[service_id] = work.assignment[service_id] + added
                state.count("new_category_placements", len(added))
        else:
            work.assignment[service_id] = chosen


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
