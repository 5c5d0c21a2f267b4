"""Refining a node's categories from the services that matched too many of them or none.

After a refine only what can change is classified again in full: the problem services, services the last pass
could not classify, and the members of categories the refine changed or removed. Categories returned verbatim keep
their services, and those services are offered the new and changed categories in the same round (they may fit
there too), which saves most of the second and third passes without hiding the new categories from anyone.

A refine prompt that does not fit the context window is shrunk (fewer samples, shorter descriptions, in turn)
until it does; its answer budget is estimated from the current categories' real length. Only a refine that cannot
fit even at the smallest size is skipped, and the build record says so.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from operator import itemgetter

from a2x_local.llm import Engine, JsonConstraint, Request, Result
from a2x_local.registry import Service
from a2x_local.taxonomy.config import BuildConfig
from a2x_local.taxonomy.induction.assign import problems
from a2x_local.taxonomy.induction.calls import (
    Planned,
    category_block,
    context_for,
    fitted_request,
    service_line,
    spread,
)
from a2x_local.taxonomy.induction.design import distinct
from a2x_local.taxonomy.induction.schemas import design_model, typical_budget
from a2x_local.taxonomy.induction.state import ASSIGN, DONE, BuildState, Draft, NodeWork, model_text


def counts(work: NodeWork) -> list[int]:
    """Services per category in the current assignment."""
    sizes = [0] * len(work.drafts)
    for positions in work.assignment.values():
        for position in positions:
            sizes[position - 1] += 1
    return sizes


def _category_chars(draft: Draft) -> int:
    """Characters of a category as the answer's JSON writes it."""
    return len(json.dumps({"source": 0, "name": draft.name, "description": draft.description,
                           "decision_rule": draft.decision_rule, "boundary": draft.boundary,
                           "keywords": draft.keywords}, ensure_ascii=False))


def _sizes(config: BuildConfig) -> list[tuple[int, int]]:
    """(samples, description characters) to try, largest first: the two halved in turn down to their floors."""
    samples, chars = config.refine_samples, config.design_description_chars
    floor = min(config.refine_min_description_chars, chars)
    steps = [(samples, chars)]
    while samples > 1 or chars > floor:
        if (len(steps) % 2 == 1 and samples > 1) or chars <= floor:
            samples = max(1, samples // 2)
        else:
            chars = max(floor, chars // 2)
        steps.append((samples, chars))
    return steps


def _request_at(work: NodeWork, services: Mapping[str, Service], config: BuildConfig, engine: Engine,
                state: BuildState) -> Callable[[int, int], Request | None]:
    """The node's refine request for a number of samples and description characters (None: it does not fit).
    What does not depend on those two is worked out once, not on every step of the shrinking."""
    generic, unassigned = problems(work, config)
    sizes = counts(work)
    tiny = [str(k) for k, size in enumerate(sizes, start=1) if size <= config.refine_tiny_size]
    limit = config.generic_limit(len(work.drafts))
    extra = min(config.refine_new_categories_estimate, config.max_children - len(work.drafts))
    budget = typical_budget(config, [_category_chars(d) for d in work.drafts], max(0, extra))
    constraint = JsonConstraint(design_model(config, config.min_children, config.max_children, len(work.drafts)))
    node_context, categories = context_for(work, state), category_block(work.drafts, counts=sizes)

    def at(samples: int, chars: int) -> Request | None:
        generic_sample = spread(generic, samples)
        unassigned_sample = spread(unassigned, samples)
        generic_lines = [f"- {service_line(services[s], chars)} [{', '.join(str(p) for p in work.assignment[s])}]"
                         for s in generic_sample]
        unassigned_lines = [f"- {service_line(services[s], chars)}" for s in unassigned_sample]
        return fitted_request(
            engine, config, "refine", constraint=constraint, budget=budget,
            context={"step": "refine", "node": work.node_id, "pass": work.passes,
                     "categories": [d.name for d in work.drafts], "counts": sizes,
                     "category_keywords": [d.keywords for d in work.drafts],
                     "generic": generic_sample, "unassigned": unassigned_sample,
                     "generic_total": len(generic), "unassigned_total": len(unassigned),
                     "samples": samples, "description_chars": chars,
                     "min_children": config.min_children, "max_children": config.max_children},
            user={"node_context": node_context, "dimension": work.dimension or "(not stated)",
                  "categories": categories, "count": len(work.services),
                  "normal": len(work.assignment) - len(generic) - len(unassigned), "generic_limit": limit,
                  "generic_total": len(generic), "unassigned_total": len(unassigned),
                  "tiny_size": config.refine_tiny_size, "tiny": ", ".join(tiny) or "none",
                  "generic_shown": len(generic_sample), "unassigned_shown": len(unassigned_sample),
                  "generic": "\n".join(generic_lines) or "(none)",
                  "unassigned": "\n".join(unassigned_lines) or "(none)"},
        )

    return at


def refine_requests(works: Sequence[NodeWork], services: Mapping[str, Service], config: BuildConfig,
                    engine: Engine, state: BuildState) -> list[Planned]:
    """One refine request per node, shrunk until it fits; a node where even the smallest cannot fit is recorded."""
    planned = []
    for work in works:
        steps = _sizes(config)
        request_at = _request_at(work, services, config, engine, state)
        request = None
        for samples, chars in steps:
            request = request_at(samples, chars)
            if request is not None:
                if (samples, chars) != steps[0]:
                    state.event("refine", work.node_id, "shrunk", samples=samples, description_chars=chars)
                break
        if request is None:
            state.event("refine", work.node_id, "skipped", reason="no refine prompt fits the context window,"
                        f" even with {steps[-1][0]} sample and {steps[-1][1]}-character descriptions")
            work.status = DONE
            continue
        planned.append(Planned(request, work.node_id))
    return planned


def apply_refine(work: NodeWork, result: Result, config: BuildConfig, state: BuildState) -> None:
    """New categories, the services to classify again, the others' positions renumbered.

    A refine that stayed invalid (or returned too few categories) ends refining: the node keeps its current,
    valid categories and assignment.
    """
    if not result.ok:
        state.count("refine_failed")
        work.status = DONE
        return
    revised: list[tuple[Draft, int]] = distinct(
        [(Draft.from_answer(answer, state), answer.source) for answer in result.value.categories], state,
        itemgetter(0))
    if len(revised) < config.min_children:
        state.count("refine_rejected")
        work.status = DONE
        return
    state.count("refines")
    sources = [source for _, source in revised]
    kept: dict[int, int] = {}   # old position -> new position, for categories returned unchanged
    for new_position, (draft, source) in enumerate(revised, start=1):
        if source and sources.count(source) == 1 and draft.same_text(work.drafts[source - 1]):
            kept[source] = new_position
    state.count("categories_changed_by_refine", len(work.drafts) - len(kept))
    new_positions = [k for k in range(1, len(revised) + 1) if k not in kept.values()]
    generic, unassigned = problems(work, config)
    again = set(generic) | set(unassigned) | set(work.failed)
    for service_id, positions in work.assignment.items():
        if any(p not in kept for p in positions):
            again.add(service_id)
    assignment = {}
    for service_id, positions in work.assignment.items():
        if service_id not in again:
            assignment[service_id] = [kept[p] for p in positions]
    work.drafts = [draft for draft, _ in revised]
    work.dimension = model_text(result.value.dimension, state) or work.dimension
    work.assignment = assignment
    work.pending = [s for s in work.services if s in again]
    # Services that keep their categories are still offered the new and changed ones (one line each).
    work.offer_new = [s for s in work.services if s in assignment] if new_positions else []
    work.new_positions = new_positions
    work.failed = []
    work.status = ASSIGN
    state.count("services_reclassified", len(work.pending))
