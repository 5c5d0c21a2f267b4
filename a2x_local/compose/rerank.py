"""Listwise re-ranking of a step's candidates by the model (SkillWeaver's re-rank pilot), off by default.

Every step of every request in a round goes to the engine in one call: one constrained request per step, showing the
request, the step and its first `rerank_candidates` services (``name: description``, delimited as data), numbered
c1..cN by code. The answer is ``{"ranking": [...]}`` with the numbers as an enum, so the model can only order what
it was shown. Code keeps the first mention of each number and puts the ones the model left out after the others, in
their retrieval order; a failed answer keeps the retrieval order. The call type is ``rerank``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from a2x_local.costs import Cost
from a2x_local.llm import Engine, JsonConstraint, Request, as_data, clip
from a2x_local.prompts import PromptBook

RERANK = "rerank"
PROMPTS = PromptBook("a2x_local.compose", call_types=(RERANK,))
DESCRIPTION_CHARS = 240     # of each candidate's description shown
_TOKENS_PER_ID = 4          # '"c10", ' in tokens, generously


def prompt_hash() -> str:
    return PROMPTS.hash()


@cache
def answer_model(count: int) -> type[BaseModel]:
    """``{"ranking": ["c1", ...]}``: at most ``count`` numbers, each from the enum c1..c<count>."""
    labels = Literal[tuple(f"c{number}" for number in range(1, count + 1))]  # type: ignore[valid-type]
    return create_model(f"Reranking_{count}", __config__=ConfigDict(extra="forbid"),
                        ranking=(list[labels], Field(min_length=1, max_length=count)))


@dataclass(frozen=True)
class RerankItem:
    """One step to re-rank: the request it belongs to, the text searched, and its candidates in retrieval order."""

    request: str
    step: str
    candidates: Sequence[str]


@dataclass(frozen=True)
class Reranked:
    """A step's candidates in the model's order (None: no valid answer, or fewer than two to rank), and its cost."""

    order: list[str] | None = None
    cost: Cost = field(default_factory=Cost)     # calls = attempts sent, retries included


def parse_ranking(labels: Sequence[str], candidates: Sequence[str]) -> list[str]:
    """The candidates in the answer's order; any the answer left out follow in their retrieval order."""
    position = {f"c{number}": service_id for number, service_id in enumerate(candidates, start=1)}
    ordered = list(dict.fromkeys(position[label] for label in labels if label in position))
    return ordered + [service_id for service_id in candidates if service_id not in ordered]


class Reranker:
    """Re-ranks steps' candidates with the engine's model, one engine call per round."""

    def __init__(self, engine: Engine, *, depth: int, names: Mapping[str, str], descriptions: Mapping[str, str],
                 temperature: float = 0.0, seed: int = 0) -> None:
        self.engine = engine
        self.depth = depth
        self.names = names
        self.descriptions = descriptions
        self.temperature = temperature
        self.seed = seed

    def rerank(self, items: Sequence[RerankItem]) -> list[Reranked]:
        """Each item's candidates re-ordered by the model, all items in one engine call."""
        results = [Reranked()] * len(items)
        batch, owners = [], []
        for index, item in enumerate(items):
            shown = list(item.candidates)[: self.depth]
            if len(shown) >= 2:
                batch.append(self._request(item, shown))
                owners.append((index, shown))
        if not batch:
            return results
        for (index, shown), result in zip(owners, self.engine.generate(batch), strict=True):
            order = None
            if result.ok:
                ordered = parse_ranking(result.value.ranking, shown)
                order = ordered + [s for s in items[index].candidates if s not in ordered]
            results[index] = Reranked(order, Cost(calls=result.attempts, prompt_tokens=result.prompt_tokens,
                                                  completion_tokens=result.completion_tokens))
        return results

    def _request(self, item: RerankItem, shown: Sequence[str]) -> Request:
        listing = "\n".join(f"c{number}. {clip(as_data(self.names.get(service_id, service_id)), 120)}: "
                            f"{clip(as_data(self.descriptions.get(service_id, '')), DESCRIPTION_CHARS)}"
                            for number, service_id in enumerate(shown, start=1))
        messages = PROMPTS.render(RERANK, request=clip(as_data(item.request), 600),
                                  step=clip(as_data(item.step), 300), services=listing)
        context: dict[str, Any] = {"call": RERANK, "step": item.step, "candidates": list(shown)}
        return Request(messages=messages, constraint=JsonConstraint(answer_model(len(shown))),
                       max_tokens=16 + _TOKENS_PER_ID * len(shown), label=RERANK, temperature=self.temperature,
                       seed=self.seed, context=context)
