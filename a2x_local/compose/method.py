"""Compose as a search method (`--method compose`), so `a2x-local eval` scores plans like any other method.

The answer is ranked: the plan's chosen services first (in execution order), then every step's remaining
candidates and deeper results taken in turns, so each need gets its share of any cut-off. The composition root (the
CLI, the server) registers `COMPOSE_SPEC` with the search stage: compose depends on search, never the other way
round, not even by name.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, Field

from a2x_local.compose.assemble import merged_ranking
from a2x_local.compose.config import ComposeConfig
from a2x_local.compose.opening import open_composer
from a2x_local.compose.planner import Composer, Planned
from a2x_local.llm import ENGINE_OPTION_NAMES, Engine, EngineName, EngineOptions
from a2x_local.overrides import overrides_of
from a2x_local.search import (
    MODES,
    Hit,
    MethodSpec,
    ProgressFactory,
    SearchAnswer,
    SearchCost,
    SearchMethod,
    SearchRequest,
)
from a2x_local.settings import Settings

RANKINGS_KEPT = 10   # per-step candidates an evaluation record keeps (per-step hit@1/5/10)


# The `[compose]` keys a run may change, typed and bounded by the table's own fields (compose/config.py).
_COMPOSE = overrides_of(ComposeConfig)


class ComposeOptions(EngineOptions):
    """The `[compose]` keys worth changing per run, the engine options (or a running engine); any other option is
    the step method's own (``-o rrf_k=30``), checked by that method."""

    model_config = ConfigDict(extra="allow", frozen=False, arbitrary_types_allowed=True)

    engine: Engine | EngineName | None = Field(None, description="a running engine, or the engine kind to start")
    step_method: _COMPOSE.step_method = None
    decomposer: _COMPOSE.decomposer = None
    steps_file: str | None = Field(None, description="decompositions from a file instead (see docs/compose.md)")
    sad: _COMPOSE.sad = None
    alpha: _COMPOSE.alpha = None
    candidates: _COMPOSE.candidates = None
    max_steps: _COMPOSE.max_steps = None
    rerank: _COMPOSE.rerank = None
    start_engine: bool | None = Field(None, description="start a model when one is needed and none was given "
                                                        "(false: decompose by the rules, refuse model-only choices)")


def compose_answer(planned: Planned, depth: int | None) -> SearchAnswer:
    """A plan as a ranked search answer; the trace carries what evaluation scores about the decomposition."""
    plan = planned.plan
    kept = [[c.id for c in ([step.choice] if step.choice else []) + step.alternatives] for step in plan.steps]
    ranking = planned.ranking(depth) if depth else merged_ranking(plan.services, kept, sum(len(ids) for ids in kept))
    trace = {"method": "compose", "decomposer": plan.decomposer,
             "compose": {"steps": len(plan.steps), "services": list(plan.services),
                         "step_rankings": [ids[:RANKINGS_KEPT] for ids in planned.rankings],
                         "sad_applied": plan.sad.applied, "sad_copy_rejected": plan.sad.copy_rejected},
             "plan": plan.model_dump(mode="json")}
    cost = SearchCost()
    cost.add(plan)   # the plan's calls, tokens and rounds; a plan has no descent to count
    return SearchAnswer(query=plan.request, hits=[Hit(service_id) for service_id in ranking], ranked=True,
                        seconds=plan.seconds, trace=trace, error=plan.error, cost=cost)


class ComposeSearch(SearchMethod):
    """The composer behind the search-method interface."""

    name = "compose"
    ranked = True

    def __init__(self, composer: Composer) -> None:
        self.composer = composer

    def search_batch(self, requests: Sequence[SearchRequest]) -> list[SearchAnswer]:
        """Requests that share k and mode are planned together (evaluation sends one batch of the same)."""
        answers: list[SearchAnswer | None] = [None] * len(requests)
        groups: dict[tuple[int | None, str | None], list[int]] = {}
        for index, request in enumerate(requests):
            groups.setdefault((request.k, request.mode), []).append(index)
        for (k, mode), indexes in groups.items():
            planned = self.composer.plan_ranked([requests[i].query for i in indexes], mode=mode, depth=k)
            for index, one in zip(indexes, planned, strict=True):
                answers[index] = compose_answer(one, k)
        return [answer for answer in answers if answer is not None]

    def describe(self) -> dict[str, Any]:
        return self.composer.describe()

    def close(self) -> None:
        self.composer.close()


def _compose(settings: Settings, db_path: Path, options: ComposeOptions,
             progress: ProgressFactory | None) -> ComposeSearch:
    engine = options.engine if isinstance(options.engine, Engine) else None
    flags = options.model_dump(include=set(ENGINE_OPTION_NAMES) - {"engine"}, exclude_none=True)
    if isinstance(options.engine, str):
        flags["engine"] = options.engine
    # The engine options are validated already, as this model's own fields (`EngineOptions`'): not again.
    composer = open_composer(
        settings, db_path=db_path, engine=engine, engine_options=EngineOptions.model_construct(**flags),
        method_options=options.model_extra, steps=options.steps_file, progress=progress,
        step_method=options.step_method, decomposer=options.decomposer, sad=options.sad, alpha=options.alpha,
        candidates=options.candidates, max_steps=options.max_steps, rerank=options.rerank,
        start_engine=options.start_engine is not False)
    return ComposeSearch(composer)


# The engine is optional: with one it decomposes with the model (and serves an LLM step method); without, it
# decomposes by the rules. Modes go to the step method (a plan refuses one its step method does not take).
COMPOSE_SPEC = MethodSpec("compose", "decompose into steps, search each, compose a plan (SkillWeaver)",
                          ComposeOptions, _compose, engine="optional", modes=MODES, cost="llm",
                          cost_note="one decomposition prompt per request (none with the rule decomposer), plus "
                                    "the step method's cost for every step",
                          engine_free={"decomposer": "rule", "start_engine": False})
