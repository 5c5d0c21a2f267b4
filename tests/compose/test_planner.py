"""The planner with a scripted engine and a scripted step method: batching, SAD rounds, the copy guard, costs."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from a2x_local.compose.compatibility import profiles
from a2x_local.compose.config import ComposeConfig
from a2x_local.compose.decompose import ModelDecomposer
from a2x_local.compose.planner import Composer
from a2x_local.errors import UserError
from a2x_local.llm.types import Request
from a2x_local.registry import Service
from a2x_local.search.types import Hit, SearchAnswer, SearchRequest
from a2x_local.testing import ScriptedEngine

SERVICES = [Service(sid, "generic", name, f"{name} service") for sid, name in [
    ("seats", "checkFlightSeats"), ("change", "changeTicket"), ("refund", "refundTicket"), ("hotel", "findHotel"),
    ("weather", "getWeather")]]
NAMES = {s.id: s.name for s in SERVICES}
TABLE = {"check seats": ["seats", "refund"], "change the ticket": ["change", "refund"],
         "check seats then change the ticket": ["refund", "seats", "change"],
         "weather in Rome": ["weather", "hotel"], "a hotel": ["hotel"]}


class StepMethod:
    """Answers step searches from TABLE; records each batch; charges tokens when ``tokens`` is set."""

    name = "scripted"
    ranked = True

    def __init__(self, tokens: int = 0) -> None:
        self.batches: list[list[str]] = []
        self.tokens = tokens

    def search_batch(self, requests: Sequence[SearchRequest]) -> list[SearchAnswer]:
        self.batches.append([r.query for r in requests])
        return [SearchAnswer(r.query, [Hit(i, 1.0) for i in TABLE.get(r.query, [])[: r.k]], ranked=True,
                             prompt_tokens=self.tokens, calls=1 if self.tokens else 0) for r in requests]


def _steps(*tasks: str) -> str:
    return json.dumps({"steps": [{"id": f"s{n}", "task": t, "depends_on": [f"s{n - 1}"] if n > 1 else []}
                                 for n, t in enumerate(tasks, start=1)]})


def _composer(rule=None, *, tokens: int = 0, **config) -> tuple[Composer, StepMethod, ScriptedEngine | None]:
    settings = ComposeConfig.defaults(**config)
    method = StepMethod(tokens)
    engine = ScriptedEngine(rule) if rule else None
    composer = Composer(config=settings, method=method, method_name="scripted", names=NAMES,
                        profiles=profiles(SERVICES, None), decomposer="model" if rule else "rule",
                        model=ModelDecomposer(engine, settings) if engine else None, engine=engine)
    return composer, method, engine


def test_rules_one_step_searches_the_request_itself_and_all_steps_go_in_one_batch() -> None:
    composer, method, _ = _composer()
    plans = composer.plan(["weather in Rome", "check seats, then change the ticket", "weather in Rome"], k=2)
    assert method.batches == [["weather in Rome", "check seats", "change the ticket"]]   # each text once
    single, double, _ = plans
    assert [s.query for s in single.steps] == ["weather in Rome"] and single.services == ["weather"]
    assert double.services == ["seats", "change"] and double.groups == [["s1"], ["s2"]]
    assert double.decomposer == "rule" and not double.sad.applied and "model decomposer" in double.sad.reason
    assert [c.id for c in double.steps[0].alternatives] == ["refund"]


def test_sad_redecomposes_with_hints_in_one_call_per_round() -> None:
    def rule(request: Request) -> str:
        if request.context["call"] == "decompose":
            return _steps(request.context["request"])
        assert request.context["hints"]                         # the re-decomposition sees names, never ids
        return _steps("check seats", "change the ticket")

    composer, method, engine = _composer(rule)
    plans = composer.plan(["check seats then change the ticket", "weather in Rome"], k=2)
    assert engine.batches == [2, 2]                             # one engine call per round, both requests
    assert set(engine.usage.by_label) == {"decompose", "decompose_sad"}
    assert method.batches == [["check seats then change the ticket", "weather in Rome"],
                              ["check seats", "change the ticket"]]   # only texts not searched before
    plan = plans[0]
    assert [s.task for s in plan.sad.first_steps] == ["check seats then change the ticket"]
    assert plan.sad.applied and plan.sad.rounds[0].kept
    assert plan.sad.rounds[0].hints == ["refundTicket", "checkFlightSeats", "changeTicket"]
    assert plan.services == ["seats", "change"] and plan.decomposer == "model:scripted"
    assert (plan.calls, plan.rounds) == (2, 2) and plan.prompt_tokens > 0


def test_steps_that_copy_hint_names_are_refused_and_counted() -> None:
    def rule(request: Request) -> str:
        if request.context["call"] == "decompose":
            return _steps("check seats", "change the ticket")
        return _steps(*request.context["hints"][:2])           # the known failure: steps are service names

    composer, _, _ = _composer(rule)
    plan = composer.plan(["check seats then change the ticket"])[0]
    assert plan.sad.copy_rejected == 1 and not plan.sad.rounds[0].kept
    assert "copy service names" in plan.sad.rounds[0].reason
    assert [s.task for s in plan.steps] == ["check seats", "change the ticket"]   # the first decomposition kept


def test_rounds_stop_once_the_hints_settle() -> None:
    def rule(request: Request) -> str:
        return _steps("check seats", "change the ticket")

    composer, _, engine = _composer(rule, sad_rounds=3)
    plan = composer.plan(["check seats then change the ticket"])[0]
    # round 1 changes nothing: the hints of its steps are the hints it was shown (overlap 1 > 0.6)
    assert engine.batches == [1, 1] and len(plan.sad.rounds) == 1
    assert plan.sad.rounds[0].jaccard == 1.0 and plan.sad.rounds[0].reason == "hints settled"
    assert composer.plan(["check seats then change the ticket"], sad=False)[0].sad.reason == "off"


def test_a_failed_decomposition_searches_the_request_whole() -> None:
    composer, _, _ = _composer(lambda request: "no json here")
    plan = composer.plan(["check seats then change the ticket"])[0]
    assert [s.query for s in plan.steps] == ["check seats then change the ticket"]
    assert plan.error is None and "decomposition failed" in plan.notes[0]
    assert not plan.sad.applied and plan.sad.reason == "the first decomposition failed"
    assert (plan.calls, plan.rounds) == (2, 2)                 # the answer and its retry, both counted


def test_costs_add_the_step_method_and_bad_requests_are_refused() -> None:
    composer, _, _ = _composer(tokens=7)
    plan = composer.plan(["check seats, then change the ticket"])[0]
    assert (plan.prompt_tokens, plan.calls) == (14, 2)
    with pytest.raises(UserError, match="query is empty"):
        composer.plan(["ok", " "])
    with pytest.raises(UserError, match="accepts the modes: none"):
        composer.plan(["weather in Rome"], mode="get_one")
    assert composer.plan([]) == []
