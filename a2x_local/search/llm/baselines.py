"""LLM baselines through the same engines as A2X: the whole catalogue in one prompt, and retrieve-then-select."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from a2x_local.llm import Engine
from a2x_local.registry import Service
from a2x_local.search.llm.answers import checked_modes, failure, make_answer
from a2x_local.search.llm.config import LlmSearchConfig
from a2x_local.search.llm.grouping import RETRIEVED_KEY, Group, split
from a2x_local.search.llm.language_hint import LanguageHint, catalogue_texts
from a2x_local.search.llm.listing import service_lines
from a2x_local.search.llm.prompting import prompt_hash
from a2x_local.search.llm.rounds import RoundRunner
from a2x_local.search.llm.selection import Selection, SelectionJob, Selector
from a2x_local.search.types import Hit, SearchAnswer, SearchMethod, SearchRequest

if TYPE_CHECKING:
    from a2x_local.search.types import Retriever

CATALOGUE_KEY = "catalogue"


def _answers(name: str, requests: Sequence[SearchRequest], modes: Sequence[str], selections: list[Selection],
             runner: RoundRunner, started: float, extra: list[dict[str, Any]] | None = None) -> list[SearchAnswer]:
    seconds = (time.perf_counter() - started) / len(requests)
    answers = []
    for q, request in enumerate(requests):
        ledger = runner.ledgers[q]
        trace = {"method": name, "mode": modes[q], "rounds": ledger.rounds, "selection": selections[q].to_dict(),
                 **(extra[q] if extra else {})}
        hits = [Hit(service_id) for service_id in selections[q].selected]
        answers.append(make_answer(request, hits, ledger, seconds, trace, failure(selections[q])))
    return answers


class FullCatalogue(SearchMethod):
    """Every service's `name: description` in one prompt; the model answers positions in that list.

    The prompt is never cut: when it does not fit the model's context window the search stops with a
    ContextWindowError saying how many tokens it needs, before anything is sent.
    """

    name = "full"
    ranked = False

    def __init__(self, services: Sequence[Service], engine: Engine, config: LlmSearchConfig) -> None:
        self.ids = [service.id for service in services]
        self.engine = engine
        self.config = config
        self.selector = Selector(service_lines(services, config), engine, config, call_type="full", split=False,
                                 language=LanguageHint(catalogue_texts(services), config.language_line))

    def prompt_tokens(self, query: str = "", mode: str | None = None) -> int:
        """Prompt tokens of the full-catalogue prompt for ``query`` (measured with the engine's tokenizer)."""
        request, _ = self.selector.request(query, mode or self.config.default_mode, Group(CATALOGUE_KEY, self.ids),
                                           "full")
        return self.engine.count_prompt_tokens(request.messages)

    def search_batch(self, requests: Sequence[SearchRequest]) -> list[SearchAnswer]:
        if not requests:
            return []
        started = time.perf_counter()
        modes = checked_modes(requests, self.config.default_mode, self.name)
        runner = RoundRunner(self.engine, len(requests))
        jobs = [SelectionJob(request.query, mode, [Group(CATALOGUE_KEY, self.ids)])
                for request, mode in zip(requests, modes, strict=True)]
        return _answers(self.name, requests, modes, self.selector.select(jobs, runner), runner, started)

    def describe(self) -> dict[str, Any]:
        return {"method": self.name, "services": len(self.ids), "engine": self.engine.describe(),
                "context_window": self.engine.max_model_len, "config": self.config.model_dump(),
                "prompts": prompt_hash()[:16]}


class RetrieveSelect(SearchMethod):
    """Hybrid retrieval top-k handed to the model for selection: the cheap strong baseline."""

    name = "select"
    ranked = False

    def __init__(self, services: Sequence[Service], retriever: Retriever, engine: Engine,
                 config: LlmSearchConfig) -> None:
        self.retriever = retriever
        self.engine = engine
        self.config = config
        self.selector = Selector(service_lines(services, config), engine, config,
                                 language=LanguageHint(catalogue_texts(services), config.language_line))

    def search_batch(self, requests: Sequence[SearchRequest]) -> list[SearchAnswer]:
        if not requests:
            return []
        started = time.perf_counter()
        modes = checked_modes(requests, self.config.default_mode, self.name)
        queries = [request.query for request in requests]
        retrieved = self.retriever.retrieve(queries, self.config.select_top_k)
        runner = RoundRunner(self.engine, len(requests))
        jobs = [SelectionJob(query, mode, split(RETRIEVED_KEY, [hit.service_id for hit in hits],
                                                self.config.group_cap) if hits else [])
                for query, mode, hits in zip(queries, modes, retrieved, strict=True)]
        extra = [{"retrieved": [hit.service_id for hit in hits]} for hits in retrieved]
        return _answers(self.name, requests, modes, self.selector.select(jobs, runner), runner, started, extra)

    def describe(self) -> dict[str, Any]:
        return {"method": self.name, "retriever": self.retriever.name,
                "top_k": self.config.select_top_k, "engine": self.engine.describe(),
                "config": self.config.model_dump(), "prompts": prompt_hash()[:16]}
