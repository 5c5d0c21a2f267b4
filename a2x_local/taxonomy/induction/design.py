"""Designing sub-categories (from descriptions or from a keyword table) and validating the root's design."""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping, Sequence
from typing import TypeVar

from a2x_local.llm import Engine, JsonConstraint, Request, Result, clip
from a2x_local.registry import Service
from a2x_local.taxonomy.config import BuildConfig
from a2x_local.taxonomy.induction.calls import Planned, context_for, fitted_request, numbered, service_line
from a2x_local.taxonomy.induction.schemas import VIOLATIONS, design_budget, design_model, validation_model
from a2x_local.taxonomy.induction.state import (
    ASSIGN,
    KEYWORDS,
    REDESIGN,
    UNSPLIT,
    VALIDATE,
    BuildState,
    Draft,
    NodeWork,
    model_text,
)

T = TypeVar("T")


def _description_request(work: NodeWork, services: Mapping[str, Service], config: BuildConfig,
                         engine: Engine, state: BuildState) -> Request | None:
    lines = [f"- {service_line(services[s], config.design_description_chars)}" for s in work.services]
    return fitted_request(
        engine, config, "design_descriptions",
        constraint=JsonConstraint(design_model(config, config.min_children, config.max_children)),
        budget=design_budget(config, config.max_children),
        min_budget=design_budget(config, max(config.min_children, config.max_children // 2)),
        context={"step": "design", "node": work.node_id, "mode": "descriptions", "services": list(work.services),
                 "min_children": config.min_children, "max_children": config.max_children},
        user={"node_context": context_for(work, state), "services": "\n".join(lines)},
    )


def choose_mode(work: NodeWork, services: Mapping[str, Service], config: BuildConfig, engine: Engine,
                state: BuildState) -> Request | None:
    """Keyword path above θ_kw, and also for a smaller node whose description prompt would not fit the window.

    Returns the description design request that was tried when it fits (``design_requests`` may reuse it).
    """
    if len(work.services) > config.keyword_path_min_services:
        work.mode, work.status = "keywords", KEYWORDS
        return None
    request = _description_request(work, services, config, engine, state)
    if request is None:
        work.mode, work.status = "keywords", KEYWORDS
        work.note = "descriptions exceed the context window: keyword path"
        state.count("design_keyword_fallbacks")
    return request


def vocabulary_text(vocabulary: Sequence[Sequence], rows: int, rest: int) -> tuple[str, int]:
    """The designer's view of a vocabulary: the ``rows`` most frequent keywords with their counts, then up to
    ``rest`` more grouped by how many services carry them; returns the text and how many keywords it leaves out."""
    table = [f"{word} ({count})" for word, count in vocabulary[:rows]]
    others = list(vocabulary[rows:rows + rest])
    buckets: dict[int, list[str]] = {}
    for word, count in others:
        buckets.setdefault(count, []).append(word)
    lines = table + [f"used by {count} service{'s' if count != 1 else ''}: {', '.join(words)}"
                     for count, words in sorted(buckets.items(), reverse=True)]
    left_out = len(vocabulary) - len(table) - len(others)
    if left_out:
        lines.append(f"({left_out} rarer keywords not shown)")
    return "\n".join(lines), left_out


def _keyword_request(work: NodeWork, config: BuildConfig, engine: Engine, state: BuildState) -> Request | None:
    """The design request over the whole vocabulary (top keywords with counts, the rest bucketed); when it does
    not fit, the bucketed rest and then the table are halved until it does, and what was left out is recorded."""
    vocabulary = work.vocabulary
    rows, rest = min(config.keyword_table_max, len(vocabulary)), max(0, len(vocabulary) - config.keyword_table_max)
    # What does not depend on how much of the vocabulary is shown, worked out once rather than per halving.
    constraint = JsonConstraint(design_model(config, config.min_children, config.max_children))
    budget = design_budget(config, config.max_children)
    min_budget = design_budget(config, max(config.min_children, config.max_children // 2))
    node_context = context_for(work, state)
    while rows >= 1 and vocabulary:
        text, left_out = vocabulary_text(vocabulary, rows, rest)
        request = fitted_request(
            engine, config, "design_keywords", constraint=constraint, budget=budget, min_budget=min_budget,
            context={"step": "design", "node": work.node_id, "mode": "keywords", "keywords": vocabulary[:rows + rest],
                     "services": list(work.services), "min_children": config.min_children,
                     "max_children": config.max_children},
            user={"node_context": node_context, "keywords": text},
        )
        if request is not None:
            if left_out:
                state.event("design", work.node_id, "shrunk", keywords_shown=len(vocabulary) - left_out,
                            keywords_left_out=left_out)
            return request
        if rest:
            rest //= 2
        else:
            rows //= 2
    return None


def design_requests(works: Sequence[NodeWork], services: Mapping[str, Service], config: BuildConfig,
                    engine: Engine, state: BuildState,
                    rendered: MutableMapping[str, Request] | None = None) -> list[Planned]:
    """One design request per node; ``rendered`` holds description requests ``choose_mode`` made (taken out)."""
    planned = []
    for work in works:
        if work.mode == "keywords":
            request = _keyword_request(work, config, engine, state)
        else:
            request = rendered.pop(work.node_id, None) if rendered is not None else None
            if request is None:
                request = _description_request(work, services, config, engine, state)
        if request is None:
            work.status, work.note = UNSPLIT, "no design prompt fits the context window (or no keywords)"
            state.event("design", work.node_id, "skipped", reason=work.note)
            continue
        planned.append(Planned(request, work.node_id))
    return planned


def distinct(items: Sequence[T], state: BuildState, draft: Callable[[T], Draft] | None = None) -> list[T]:
    """Categories with the same name would split one concept in two: later duplicates are dropped.

    ``items`` are drafts, or anything ``draft`` gives the draft of (a refine's (draft, source) pairs).
    """
    seen: set[str] = set()
    kept = []
    for item in items:
        key = (draft(item) if draft else item).name.casefold()
        if key in seen:
            state.count("duplicate_categories_dropped")
            continue
        seen.add(key)
        kept.append(item)
    return kept


def enter_assign(work: NodeWork) -> None:
    work.status = ASSIGN
    work.assignment = {}
    work.failed = []
    work.pending = list(work.services)


def apply_design(work: NodeWork, result: Result, config: BuildConfig, state: BuildState, *, is_root: bool) -> None:
    """A design that stayed invalid leaves the node a leaf (safe: its services stay reachable)."""
    drafts = distinct([Draft.from_answer(c, state) for c in result.value.categories], state) if result.ok else []
    if len(drafts) < config.min_children:
        work.status = UNSPLIT
        work.note = "design failed" if not result.ok else "design had too few distinct categories"
        state.count("design_failed_nodes")
        return
    # Name order, not the order the model listed them in: the same categories always give the same classification
    # prompts (and so the same cached answers in a rebuild), whatever order a designer answers in.
    work.drafts = sorted(drafts, key=lambda draft: draft.name.casefold())
    work.dimension = model_text(result.value.dimension, state)
    if is_root and config.root_validation_rounds > 0:
        work.status = VALIDATE
    else:
        enter_assign(work)


def _summary(draft: Draft, *, boundary: bool = False) -> str:
    keywords = f" [keywords: {', '.join(draft.keywords)}]" if draft.keywords else ""
    limit = f" ({draft.boundary})" if boundary and draft.boundary else ""
    return f"{draft.name}: {draft.description}{limit}{keywords}"


def validation_requests(works: Sequence[NodeWork], config: BuildConfig, engine: Engine,
                        state: BuildState) -> list[Planned]:
    planned = []
    for work in works:
        count = len(work.drafts)
        per_verdict = 24 + sum(len(v) + 3 for v in VIOLATIONS)
        request = fitted_request(
            engine, config, "validate_root", constraint=JsonConstraint(validation_model(count)),
            budget=int(count * per_verdict / config.budget_chars_per_token) + 32,
            context={"step": "validate", "node": work.node_id, "categories": [d.name for d in work.drafts]},
            user={"categories": numbered([_summary(d, boundary=True) for d in work.drafts])},
        )
        if request is None:
            state.count("validate_unfit")
            enter_assign(work)
            continue
        planned.append(Planned(request, work.node_id))
    return planned


def apply_validation(work: NodeWork, result: Result, state: BuildState) -> None:
    """A validation that stayed invalid keeps the design as it is (safe: it was a valid design)."""
    work.validations += 1
    if not result.ok:
        state.count("validate_failed")
        enter_assign(work)
        return
    work.flagged = {str(k): list(dict.fromkeys(v.violations))
                    for k, v in enumerate(result.value.verdicts, start=1) if v.violations}
    state.count("root_categories_flagged", len(work.flagged))
    if work.flagged:
        work.status = REDESIGN
    else:
        enter_assign(work)


def redesign_requests(works: Sequence[NodeWork], config: BuildConfig, engine: Engine,
                      state: BuildState) -> list[Planned]:
    planned = []
    for work in works:
        kept = [d for k, d in enumerate(work.drafts, start=1) if str(k) not in work.flagged]
        flagged = [(d, work.flagged[str(k)]) for k, d in enumerate(work.drafts, start=1) if str(k) in work.flagged]
        room = config.max_children - len(kept)
        flagged_lines = [f"- {clip(d.name, config.name_max_chars)}: {d.description} (problems: {', '.join(v)};"
                         f" keywords: {', '.join(d.keywords) or 'none'})" for d, v in flagged]
        request = fitted_request(
            engine, config, "redesign_root",
            constraint=JsonConstraint(design_model(config, 1, room)),
            budget=design_budget(config, room),
            min_budget=design_budget(config, max(1, min(room, len(flagged) + 2))),
            context={"step": "redesign", "node": work.node_id, "kept": [d.name for d in kept],
                     "flagged": [d.name for d, _ in flagged], "violations": [v for _, v in flagged],
                     "max_new": room},
            user={"dimension": work.dimension or "(not stated)", "kept": numbered([_summary(d) for d in kept])
                  or "(none)", "flagged": "\n".join(flagged_lines)},
        )
        if request is None:
            state.count("redesign_unfit")
            enter_assign(work)
            continue
        planned.append(Planned(request, work.node_id))
    return planned


def apply_redesign(work: NodeWork, result: Result, config: BuildConfig, state: BuildState) -> None:
    """Kept categories plus replacements; a result with fewer than the minimum categories is rejected."""
    if not result.ok:
        state.count("redesign_failed")
        enter_assign(work)
        return
    kept = [d for k, d in enumerate(work.drafts, start=1) if str(k) not in work.flagged]
    proposal = distinct(kept + [Draft.from_answer(c, state) for c in result.value.categories], state)
    if len(proposal) < config.redesign_min_categories:
        state.count("redesign_rejected")
    else:
        state.count("redesign_accepted")
        work.drafts = proposal[: config.max_children]
    work.flagged = {}
    if work.validations < config.root_validation_rounds:
        work.status = VALIDATE
    else:
        enter_assign(work)
