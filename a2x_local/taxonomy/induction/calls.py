"""What every build step shares: service lines, requests that fit the context window, category listings."""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from a2x_local.llm import Constraint, Engine, Message, Request, as_data, clip
from a2x_local.registry import Service
from a2x_local.taxonomy.config import BuildConfig
from a2x_local.taxonomy.induction.state import BuildState, Draft, NodeWork
from a2x_local.taxonomy.prompts import node_context, render


def service_line(service: Service, description_chars: int) -> str:
    """`name: description` with the description cut; the name is always shown in full (up to 120 chars). Service
    text is data: control markers and look-alikes of the prompt's delimiters are defused (`as_data`)."""
    return f"{clip(as_data(service.name), 120)}: {clip(as_data(service.description), description_chars)}"


def spread(items: Sequence[str], count: int) -> list[str]:
    """``count`` items evenly spaced over ``items`` (all of them when there are fewer): samples that cover the
    whole node rather than its first ids."""
    if count >= len(items):
        return list(items)
    return [items[i * len(items) // count] for i in range(count)]


def context_for(work: NodeWork, state: BuildState) -> str:
    """The lines naming the category a keyword, design or refine request is about (its description and boundary
    below the root)."""
    node = state.nodes[work.node_id]
    return node_context(is_root=work.node_id == state.root_id, count=len(work.services), path=work.path,
                        description=node.description, boundary=node.boundary)


def numbered(lines: Sequence[str]) -> str:
    """Numbered in numeric order (1, 2, … 10), never string order."""
    return "\n".join(f"{k}. {line}" for k, line in enumerate(lines, start=1))


def category_block(drafts: Sequence[Draft], *, counts: Sequence[int] | None = None) -> str:
    """The categories as a model sees them when classifying: name, description, decision rule, boundary."""
    blocks = []
    for k, draft in enumerate(drafts, start=1):
        size = f" ({counts[k - 1]})" if counts is not None else ""
        boundary = draft.boundary if draft.boundary.lower().startswith("not here") else (
            f"NOT here: {draft.boundary}")
        blocks.append(f"{k}. {draft.name}{size}: {draft.description}\n   Belongs here: {draft.decision_rule}\n"
                      f"   {boundary}")
    return "\n".join(blocks)


def system_values(config: BuildConfig) -> dict[str, object]:
    """Build-wide placeholders of the system prompts (identical for every request of a build)."""
    return {"max_keywords": config.keywords_per_service_max, "min_children": config.min_children,
            "max_children": config.max_children, "language_rule": language_rule(config.category_language)}


def language_rule(language: str) -> str:
    """The sentence that tells a designer which language categories are named in (`[build] category_language`,
    resolved from the registry by the runner; "auto" where no registry is at hand)."""
    where = "the language the services are written in" if language == "auto" else (
        f"{language}, the language of the registry's services")
    return f"Write category names, descriptions, decision rules and boundaries in {where}."


@dataclass(frozen=True)
class Planned:
    """A request and what its answer is about (the owner node, the offered services)."""

    request: Request
    node: str
    items: tuple[str, ...] = ()


def fitted_request(engine: Engine, config: BuildConfig, call_type: str, *, constraint: Constraint, budget: int,
                   context: Mapping[str, Any], min_budget: int | None = None, user: Mapping[str, object],
                   system: Mapping[str, object] | None = None) -> Request | None:
    """A request whose prompt plus answer budget fits the engine's context window, or None when it cannot.

    The budget is lowered to what the window leaves, but never below ``min_budget`` (default: the whole budget,
    since a cut-off line answer is useless).
    """
    messages: list[Message] = render(call_type, system={**system_values(config), **(system or {})}, **user)
    window = engine.max_model_len
    max_tokens = budget
    if window:
        room = window - engine.count_prompt_tokens(messages) - 8
        if room < min(budget, budget if min_budget is None else min_budget):
            return None
        max_tokens = min(budget, room)
    return Request(messages=messages, constraint=constraint, max_tokens=max_tokens, label=call_type,
                   temperature=config.temperature, seed=config.seed, context=dict(context))


def _boundary_hash(item: str) -> int:
    return int.from_bytes(hashlib.blake2b(item.encode(), digest_size=8).digest(), "big")


def chunks(items: Sequence[str], size: int, boundaries: str = "fixed") -> list[list[str]]:
    """Batches of at most ``size`` items.

    "fixed": every ``size`` items. "content": a batch also ends, once it holds half of ``size``, after an item
    whose id hashes to a multiple of ⌊size/3⌋ (content-defined boundaries, as in deduplicating backups). Adding or
    removing one service then changes only its own batch, not every batch after it, so a rebuild sends the other
    batches' prompts unchanged and the answer cache answers them; batches hold about 3/4 of ``size`` on average.
    """
    if boundaries == "fixed" or size < 6:
        return [list(items[i:i + size]) for i in range(0, len(items), size)]
    least, every = (size + 1) // 2, size // 3
    batches: list[list[str]] = []
    batch: list[str] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size or (len(batch) >= least and _boundary_hash(item) % every == 0):
            batches.append(batch)
            batch = []
    if batch:
        batches.append(batch)
    return batches


def fit_chunks(items: Sequence[str], size: int, make: Callable[[list[str]], Request | None], *,
               boundaries: str = "fixed") -> tuple[list[tuple[list[str], Request]], list[str]]:
    """Requests over chunks of ``items`` (see `chunks`); a chunk whose prompt does not fit is halved until it does.

    Returns the (chunk, request) pairs and the items that do not fit even alone.
    """
    unfit: list[str] = []
    planned = list(fitting_chunks(items, size, make, unfit, boundaries=boundaries))
    return planned, unfit


def fitting_chunks(items: Sequence[str], size: int, make: Callable[[list[str]], Request | None], unfit: list[str], *,
                   boundaries: str = "fixed") -> Iterator[tuple[list[str], Request]]:
    """`fit_chunks` made lazily, one request at a time, so a round over a million services is never one list of
    prompts; the items that do not fit even alone are added to ``unfit`` as they are met."""
    todo = deque(chunks(items, size, boundaries))
    while todo:
        chunk = todo.popleft()
        request = make(chunk)
        if request is not None:
            yield chunk, request
        elif len(chunk) == 1:
            unfit.extend(chunk)
        else:
            half = len(chunk) // 2
            todo.extendleft([chunk[half:], chunk[:half]])
