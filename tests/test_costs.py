"""One cost type (a2x_local/costs.py) under every result: the fields are declared once, every result type derives
from it or carries it (a search answer's ``cost``), and its fields reach the JSON of each result under the same
keys."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

from a2x_local.compose import Plan
from a2x_local.compose.method import compose_answer
from a2x_local.compose.planner import Planned
from a2x_local.compose.types import SadReport
from a2x_local.costs import AnswerCost, Cost
from a2x_local.llm.accounting import CallStats, Usage
from a2x_local.search import SearchAnswer, SearchCost
from a2x_local.search.llm.rounds import RoundRunner
from a2x_local.serve.views import SearchResult, SearchResultCost, search_result

ROOT = Path(__file__).resolve().parents[1]
TOKENS = {"prompt_tokens", "completion_tokens"}
# One model call's own record (the engine's raw output, its validated result, an answer kept in the cache): the
# tokens of that one call, from which the costs are counted.
ONE_CALL = {("a2x_local/llm/types.py", "RawOutput"), ("a2x_local/llm/types.py", "Result"),
            ("a2x_local/llm/cache.py", "CachedAnswer")}
# The server's search answer carries its cost (with detail "full") as a `SearchResultCost`.
RESULTS = {SearchResultCost: AnswerCost, Plan: AnswerCost, CallStats: Cost}


def test_token_fields_are_declared_once():
    declared = []
    for path in sorted((ROOT / "a2x_local").rglob("*.py")):
        where = str(path.relative_to(ROOT))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and (where, node.name) not in ONE_CALL:
                declared += [f"{where}: {node.name}.{item.target.id}" for item in node.body
                             if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
                             and item.target.id in TOKENS]
    assert sorted(declared) == ["a2x_local/costs.py: Cost.completion_tokens", "a2x_local/costs.py: Cost.prompt_tokens"]


def test_every_result_type_derives_from_the_cost_type():
    for result, base in RESULTS.items():
        assert issubclass(result, base), f"{result.__name__} must derive from {base.__name__}"
    assert issubclass(SearchCost, AnswerCost) and issubclass(AnswerCost, Cost)
    assert all(type(ledger) is SearchCost for ledger in RoundRunner(None, 2).ledgers)   # a query's share


def test_a_search_answer_carries_its_cost_and_is_not_one():
    assert not issubclass(SearchAnswer, Cost) and not hasattr(AnswerCost, "cost_values")
    cost = next(item for item in dataclasses.fields(SearchAnswer) if item.name == "cost")
    assert cost.type in (SearchCost, "SearchCost")
    one, two = SearchAnswer("q", [], ranked=True), SearchAnswer("q", [], ranked=True)
    one.cost.calls += 1
    assert two.cost.calls == 0, "each answer has a cost of its own"


def test_the_cost_fields_keep_their_json_keys():
    keys = {"calls", "prompt_tokens", "completion_tokens", "rounds"}
    assert {item.name for item in dataclasses.fields(AnswerCost)} == keys
    for model in (SearchResultCost, Plan):
        properties = model.model_json_schema()["properties"]
        assert keys <= set(properties), model.__name__
        assert all(properties[key]["type"] == "integer" for key in keys)
    assert {"candidates_shown", "capped"} <= set(SearchResultCost.model_json_schema()["properties"])
    assert "SearchResultCost" in str(SearchResult.model_json_schema()["properties"]["cost"])
    usage = Usage()
    usage.record("select", calls=2, prompt_tokens=30, completion_tokens=4, retries=1)
    counted = usage.to_dict()
    assert list(counted["by_call_type"]["select"])[:3] == ["calls", "prompt_tokens", "completion_tokens"]
    assert counted["total"]["total_tokens"] == 34 and "rounds" not in counted["total"]


def test_costs_add_up_in_sequence_and_side_by_side():
    plan = Plan(request="r", decomposer="rule", method="bm25", steps=[], sad=SadReport(applied=False))
    plan.add(AnswerCost(calls=1, prompt_tokens=10, completion_tokens=2, rounds=1))
    searched = SearchAnswer("q", [], ranked=False, cost=SearchCost(calls=1, prompt_tokens=7, rounds=2))
    plan.add(AnswerCost.side_by_side([AnswerCost(calls=2, prompt_tokens=5, rounds=3), searched.cost]))
    dumped = plan.model_dump()
    assert {key: dumped[key] for key in ("calls", "prompt_tokens", "completion_tokens", "rounds")} == \
        {"calls": 4, "prompt_tokens": 22, "completion_tokens": 2, "rounds": 4}
    assert plan.total_tokens == 24
    answer = compose_answer(Planned(plan, [], [], None), None)
    assert (answer.cost.calls, answer.cost.prompt_tokens, answer.cost.rounds) == (4, 22, 4)
    result = search_result("compose", None, answer, [], detail="full", next_cursor=None)
    assert result.model_dump()["cost"]["calls"] == 4 and result.model_dump()["cost"]["candidates_shown"] == 0
