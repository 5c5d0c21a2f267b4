"""Refining a node's categories from the services that matched too many of them or none.

After a refine only what can change is classified again: the problem services, services the last pass could not
classify, and the members of categories the refine changed or removed. Categories returned verbatim keep their
services, which saves most of the second and third passes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from operator import itemgetter

from a2x_local.llm import Engine, JsonConstraint, Result
from a2x_local.registry import Service
from a2x_local.taxonomy.assign import problems
from a2x_local.taxonomy.calls import Planned, category_block, fitted_request, service_line
from a2x_local.taxonomy.config import BuildConfig
from a2x_local.taxonomy.design import distinct
from a2x_local.taxonomy.schemas import design_budget, design_model
from a2x_local.taxonomy.state import ASSIGN, DONE, BuildState, Draft, NodeWork


def counts(work: NodeWork) -> list[int]:
    """Services per category in the current assignment."""
    sizes = [0] * len(work.drafts)
    for positions in work.assignment.values():
        for position in positions:
            sizes[position - 1] += 1
    return sizes


def refine_requests(works: Sequence[NodeWork], services: Mapping[str, Service], config: BuildConfig,
                    engine: Engine, state: BuildState) -> list[Planned]:
    planned = []
    for work in works:
        generic, unassigned = problems(work, config)
        sizes = counts(work)
        tiny = [str(k) for k, size in enumerate(sizes, start=1) if size <= config.refine_tiny_size]
        generic_sample = generic[: config.refine_samples]
        unassigned_sample = unassigned[: config.refine_samples]
        generic_lines = [f"- {service_line(services[s], config.design_description_chars)}"
                         f" [{', '.join(str(p) for p in work.assignment[s])}]" for s in generic_sample]
        unassigned_lines = [f"- {service_line(services[s], config.design_description_chars)}"
                            for s in unassigned_sample]
        request = fitted_request(
            engine, config, "refine",
            constraint=JsonConstraint(design_model(config, config.min_children, config.max_children,
                                                   len(work.drafts))),
            budget=design_budget(config, config.max_children, with_source=True),
            min_budget=design_budget(config, min(config.max_children, len(work.drafts) + 2), with_source=True),
            context={"step": "refine", "node": work.node_id, "pass": work.passes,
                     "categories": [d.name for d in work.drafts], "counts": sizes,
                     "category_keywords": [d.keywords for d in work.drafts],
                     "generic": generic_sample, "unassigned": unassigned_sample,
                     "generic_total": len(generic), "unassigned_total": len(unassigned),
                     "min_children": config.min_children, "max_children": config.max_children},
            user={"node_path": work.path, "count": len(work.services),
                  "categories": category_block(work.drafts, counts=sizes),
                  "tiny_size": config.refine_tiny_size, "tiny": ", ".join(tiny) or "none",
                  "generic": "\n".join(generic_lines) or "(none)",
                  "unassigned": "\n".join(unassigned_lines) or "(none)"},
        )
        if request is None:
            state.count("refine_unfit")
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
        [(Draft.from_answer(answer), answer.source) for answer in result.value.categories], state, itemgetter(0))
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
    work.assignment = assignment
    work.pending = [s for s in work.services if s in again]
    work.failed = []
    work.status = ASSIGN
    state.count("services_reclassified", len(work.pending))
