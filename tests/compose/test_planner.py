"""The planner with a scripted engine and a scripted step method: batching, SAD rounds, the copy guard, costs."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from a2x_local.compose.compatibility import profiles
from a2x_local.compose.config import ComposeConfig
from a2x_local.compose.decompose import ModelDecomposer
from a2x_local.compose.planner import Composer
from a2x_local.compose.relevance import Confidence, Relevance
from a2x_local.compose.rerank import Reranker
from a2x_local.errors import UserError
from a2x_local.llm.types import Request
from a2x_local.registry import Service
from a2x_local.search.retrieval.similarity import Background
from a2x_local.search.types import Hit, SearchAnswer, SearchCost, SearchMethod, SearchRequest
from a2x_local.testing import ScriptedEngine

SERVICES = [Service(sid, "generic", name, f"{name} service") for sid, name in [
    ("seats", "checkFlightSeats"), ("change", "changeTicket"), ("refund", "refundTicket"), ("hotel", "findHotel"),
    ("weather", "getWeather")]]
NAMES = {s.id: s.name for s in SERVICES}
TABLE = {"check seats": ["seats", "refund"], "change the ticket": ["change", "refund"],
         "check seats then change the ticket": ["refund", "seats", "change"],
         "weather in Rome": ["weather", "hotel"], "a hotel": ["hotel"], "check seats; change the ticket": ["weather"]}


class StepMethod(SearchMethod):
    """Answers step searches from TABLE; records each batch; charges tokens when ``tokens`` is set."""

    name = "scripted"
    ranked = True

    def __init__(self, tokens: int = 0) -> None:
        self.batches: list[list[str]] = []
        self.tokens = tokens

    def search_batch(self, requests: Sequence[SearchRequest]) -> list[SearchAnswer]:
        self.batches.append([r.query for r in requests])
        return [SearchAnswer(r.query, [Hit(i, 1.0) for i in TABLE.get(r.query, [])[: r.k]], ranked=True,
                             cost=SearchCost(prompt_tokens=self.tokens, calls=1 if self.tokens else 0))
                for r in requests]


def _steps(*tasks: str) -> str:
    return json.dumps({"steps": [{"id": f"s{n}", "task": t, "depends_on": [f"s{n - 1}"] if n > 1 else []}
                                 for n, t in enumerate(tasks, start=1)]})


def _composer(rule=None, *, tokens: int = 0, **config) -> tuple[Composer, StepMethod, ScriptedEngine | None]:
    settings = ComposeConfig.defaults(**config)
    method = StepMethod(tokens)
    engine = ScriptedEngine(rule) if rule else None
    composer = Composer(config=settings, method=method, method_name="scripted", names=NAMES,
                        profiles=profiles(SERVICES, None)[0], decomposer="model" if rule else "rule",
                        model=ModelDecomposer(engine, settings) if engine else None, engine=engine)
    return composer, method, engine


def test_rules_one_step_searches_the_request_itself_and_all_steps_go_in_one_batch() -> None:
    composer, method, _ = _composer()
    plans = composer.plan(["weather in Rome", "check seats, then change the ticket", "weather in Rome"], k=2)
    # each text once; the two-step request itself too, for its ranked answer
    assert method.batches == [["weather in Rome", "check seats", "change the ticket",
                               "check seats, then change the ticket"]]
    single, double, _ = plans
    assert [s.query for s in single.steps] == ["weather in Rome"] and single.services == ["weather"]
    assert double.services == ["seats", "change"] and double.groups == [["s1"], ["s2"]]
    assert double.decomposer == "rule" and not double.sad.applied and "model decomposer" in double.sad.reason
    assert [c.id for c in double.steps[0].alternatives] == ["refund"]


def test_the_ranked_answer_takes_the_whole_request_in_turn() -> None:
    composer, _, _ = _composer()
    [planned] = composer.plan_ranked(["check seats; change the ticket"], k=2, depth=5)
    assert planned.whole == ["weather"] and planned.rankings == [["seats", "refund"], ["change", "refund"]]
    assert planned.ranking(5) == ["seats", "change", "weather", "refund"]     # rank 1 of each, then rank 2
    [single] = composer.plan_ranked(["weather in Rome"], k=2, depth=5)
    assert single.whole == [] and single.ranking(5) == ["weather", "hotel"]


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
    assert (plan.prompt_tokens, plan.calls) == (21, 3)        # two steps and the request whole
    with pytest.raises(UserError, match="query is empty"):
        composer.plan(["ok", " "])
    with pytest.raises(UserError, match="has no modes"):
        composer.plan(["weather in Rome"], mode="get_one")
    assert composer.plan([]) == []


class Similarity:
    """The dense model's answers from tables: cosine per (text, service), a background of mean 0.1, spread 0.1."""

    model = "table"
    size = 1000

    def __init__(self, cosines: dict[tuple[str, str], float]) -> None:
        self.table = cosines
        self.asked: list[list[str]] = []

    def top(self, texts, k):
        self.asked.append(list(texts))
        return [sorted(((sid, c) for (t, sid), c in self.table.items() if t == text), key=lambda x: -x[1])[:k]
                for text in texts]

    def background(self, texts, extra=None):
        return [Background(0.1, 0.1) for _ in texts]

    def cosines(self, texts, ids):
        return [[self.table.get((text, sid), 0.0) for sid in row] for text, row in zip(texts, ids, strict=True)]

    def alike(self, texts):
        """Step texts are alike only where the table says so (as ("step", "other step"))."""
        return [[1.0 if a == b else self.table.get((a, b), self.table.get((b, a), 0.0)) for b in texts]
                for a in texts]


COSINES = {("check seats", "seats"): 0.7, ("check seats", "refund"): 0.3, ("change the ticket", "change"): 0.8,
           ("change the ticket", "refund"): 0.35, ("weather in Rome", "weather"): 0.45,
           ("weather in Rome", "hotel"): 0.2,
           ("check seats and refund tickets", "refund"): 0.4, ("refund tickets", "refund"): 0.8,
           ("a hotel", "hotel"): 0.12}


def _with_similarity(table=COSINES, engine=None, **config) -> tuple[Composer, StepMethod, Similarity]:
    settings = ComposeConfig.defaults(**config)
    similarity = Similarity(table)
    method = StepMethod()
    composer = Composer(config=settings, method=method, method_name="scripted", names=NAMES,
                        profiles=profiles(SERVICES, None)[0], decomposer="rule", engine=engine,
                        relevance=Relevance(similarity, Confidence(settings.confidence_z, settings.confidence_scale,
                                                                   settings.low_confidence)),
                        reranker=Reranker(engine, depth=3, names=NAMES, descriptions={s.id: s.description
                                                                                      for s in SERVICES})
                        if engine else None)
    return composer, method, similarity


def test_steps_carry_the_cosine_and_a_confidence() -> None:
    composer, _, _ = _with_similarity()
    plan, weak = composer.plan(["check seats, then change the ticket", "a hotel"], k=2)
    first = plan.steps[0]
    assert first.choice.id == "seats" and first.choice.similarity == pytest.approx(0.7)
    assert first.choice.z == pytest.approx(6.0) and first.confidence > 0.85 and not first.low_confidence
    only = weak.steps[0]                                   # cosine 0.12: 0.2 deviations above the background
    assert only.choice.id == "hotel" and only.low_confidence and only.confidence < 0.1


def test_the_rule_decomposer_asks_the_registry_once_per_round() -> None:
    table = {**COSINES, ("check seats and refund tickets", "seats"): 0.6}
    del table[("check seats and refund tickets", "refund")]   # the whole request finds the seats, not the refund
    composer, _, similarity = _with_similarity(table)
    plans = composer.plan(["check seats and refund tickets", "weather in Rome"], k=2)
    assert similarity.asked == [["check seats", "refund tickets", "check seats and refund tickets"]]
    assert [s.task for s in plans[0].steps] == ["check seats", "refund tickets"]   # both confident, distinct
    unasked, _, _ = _with_similarity(table, probe=False)
    assert len(unasked.plan(["check seats and refund tickets"], k=2)[0].steps) == 1
    covered, _, _ = _with_similarity({**table, ("check seats and refund tickets", "refund"): 0.4})
    # the whole request finds both services itself: no need to split
    assert len(covered.plan(["check seats and refund tickets"], k=2)[0].steps) == 1


def _reverse(request: Request) -> str:
    """Re-ranks by reversing the offered order (c3, c2, c1)."""
    count = len(request.context["candidates"])
    return json.dumps({"ranking": [f"c{n}" for n in range(count, 0, -1)]})


def test_rerank_orders_every_step_in_one_call_and_counts_it() -> None:
    engine = ScriptedEngine(_reverse)
    composer, _, _ = _with_similarity(engine=engine)
    plans = composer.plan(["check seats, then change the ticket", "weather in Rome"], k=2, rerank=True)
    assert engine.batches == [3]                              # three steps of two requests, one engine call
    assert [s.choice.id for s in plans[0].steps] == ["refund", "refund"]   # the model's first pick leads
    assert plans[0].steps[0].choice.similarity == pytest.approx(0.7)      # ... with the step's best cosine
    assert engine.usage.by_label["rerank"].calls == 3 and plans[0].calls == 2 and plans[0].rounds == 1
    composer.plan(["weather in Rome"], k=2)                  # off by default: no call
    assert engine.batches == [3]
    broken = ScriptedEngine(lambda request: "not json")
    composer, _, _ = _with_similarity(engine=broken)
    plan = composer.plan(["weather in Rome"], k=2, rerank=True)[0]
    assert plan.steps[0].choice.id == "weather" and any("re-ranking step s1 failed" in n for n in plan.notes)
    plain, _, _ = _with_similarity()
    with pytest.raises(UserError, match="re-ranking needs a model"):
        plain.plan(["weather in Rome"], rerank=True)


def _planner(names: dict[str, str], table: dict[str, list[str]], cosines: dict, **config) -> Composer:
    """A composer over ``names`` whose step method answers from ``table`` and whose dense model from ``cosines``."""
    services = [Service(sid, "generic", name, f"{name} service") for sid, name in names.items()]

    class Method(StepMethod):
        def search_batch(self, requests):
            return [SearchAnswer(r.query, [Hit(i, 1.0) for i in table.get(r.query, [])[: r.k]], ranked=True)
                    for r in requests]

    settings = ComposeConfig.defaults(**config)
    return Composer(config=settings, method=Method(), method_name="scripted", names=names,
                    profiles=profiles(services, None)[0], decomposer="rule",
                    relevance=Relevance(Similarity(cosines), Confidence(settings.confidence_z,
                                                                        settings.confidence_scale,
                                                                        settings.low_confidence)))


NAMED = {"hub": "notifyHub", "slack": "Slack MCP Server", "jira": "Jira", "mail": "mailer", "sky": "SkyCast",
         "cast": "castWeather"}
# "post it on Slack" takes the Jira step's output: it is searched as "post on Slack" (references.retrieval_text).
NAMED_TABLE = {"open a Jira ticket": ["jira", "hub"], "post on Slack": ["hub", "mail"],
               "open a Jira ticket then post it on Slack": ["jira", "hub"], "post it on Slack and nothing else":
               ["hub", "mail"]}


def test_a_step_that_names_a_service_chooses_it_and_ranks_it_first() -> None:
    cosines = {("post on Slack", "hub"): 0.6, ("post on Slack", "slack"): 0.3,
               ("post on Slack", "mail"): 0.2, ("open a Jira ticket", "jira"): 0.7}
    composer = _planner(NAMED, NAMED_TABLE, cosines)
    [planned] = composer.plan_ranked(["open a Jira ticket then post it on Slack"], k=3, depth=5)
    second = planned.plan.steps[1]
    # the search never found the Slack server; the step names it, so it is a candidate, chosen, and first
    assert second.choice.id == "slack" and second.choice.named and second.choice.cosine == pytest.approx(0.3)
    assert [c.id for c in second.alternatives] == ["hub", "mail"] and not second.alternatives[0].named
    assert planned.rankings[1][:3] == ["slack", "hub", "mail"]
    off = _planner(NAMED, NAMED_TABLE, cosines, named_services=False)
    assert off.plan(["open a Jira ticket then post it on Slack"], k=3)[0].steps[1].choice.id == "hub"
    # a one-step plan is plain search of the request, names or not
    assert composer.plan(["post it on Slack and nothing else"], k=3)[0].services == ["hub"]


def test_a_candidate_that_belongs_to_the_other_step_loses_its_likeness_to_it() -> None:
    names = {"sky": "skyForecast", "cast": "castWeather", "mail": "mailer"}
    table = {"find the weather in Rome": ["sky", "cast"], "email the forecast to my team": ["cast", "mail"],
             "find the weather in Rome then email the forecast to my team": ["sky"]}
    cosines = {("find the weather in Rome", "sky"): 0.7, ("find the weather in Rome", "cast"): 0.6,
               ("email the forecast to my team", "cast"): 0.45, ("email the forecast to my team", "mail"): 0.40,
               ("find the weather in Rome", "email the forecast to my team"): 0.5}
    request = "find the weather in Rome then email the forecast to my team"
    plain = _planner(names, table, cosines, neighbour_penalty=0.0, alpha=1.0).plan([request], k=2)[0]
    assert plain.steps[1].choice.id == "cast"                       # Eq. 4 alone: the weather service
    step = _planner(names, table, cosines, alpha=1.0, neighbour_penalty=1.0).plan([request], k=2)[0].steps[1]
    # castWeather: 0.45 - 1.0 x (0.5 step likeness x 0.6 cosine with the weather step) = 0.15; the mailer: 0.40
    assert step.choice.id == "mail" and step.alternatives[0].similarity == pytest.approx(0.15)
    assert step.alternatives[0].rival_cosine == pytest.approx(0.3) and step.choice.rival_cosine == 0.0


def test_places_in_the_ranked_answer_follow_how_unsure_each_step_is() -> None:
    names = {"a1": "a1", "a2": "a2", "a3": "a3", "b1": "b1", "b2": "b2", "b3": "b3", "b4": "b4"}
    table = {"sure step": ["a1", "a2", "a3"], "unsure step": ["b1", "b2", "b3", "b4"],
             "sure step then unsure step": []}
    cosines = {("sure step", "a1"): 0.9, ("unsure step", "b1"): 0.15}   # z 8 (sure) and 0.5 (unsure)
    composer = _planner(names, table, cosines, candidates=1)
    [planned] = composer.plan_ranked(["sure step then unsure step"], depth=6)
    sure, unsure = planned.plan.steps
    assert sure.confidence > 0.95 and unsure.confidence < 0.05
    assert planned.ranking(6) == ["a1", "b1", "b2", "b3", "b4", "a2"]
    turns = _planner(names, table, cosines, candidates=1, ranking_shares="turns")
    assert turns.plan_ranked(["sure step then unsure step"], depth=6)[0].ranking(6) == [
        "a1", "b1", "a2", "b2", "a3", "b3"]
