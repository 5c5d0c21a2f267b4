"""The model decomposer with a scripted engine: the schema offers the ids, one engine call per round, answers
repaired into a DAG, failures reported rather than raised."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from a2x_local.compose.config import ComposeConfig
from a2x_local.compose.decompose import (
    ModelDecomposer,
    answer_budget,
    answer_model,
    parse_steps,
    request_text,
)
from a2x_local.costs import AnswerCost as Ledger
from a2x_local.llm.types import Request
from a2x_local.testing import ScriptedEngine


def _answer(*steps: tuple[str, str, list[str]]) -> str:
    return json.dumps({"steps": [{"id": i, "task": t, "depends_on": d} for i, t, d in steps]})


def test_the_schema_offers_the_ids_and_bounds_the_answer() -> None:
    model = answer_model(3, 40)
    schema = json.dumps(model.model_json_schema())
    assert '"enum": ["s1", "s2", "s3"]' in schema
    model.model_validate_json(_answer(("s1", "a", []), ("s2", "b", ["s1"])))
    for bad in (_answer(("s4", "a", [])),                                  # an id that was not offered
                _answer(*[("s1", "a", [])] * 4),                           # more than N steps
                _answer(("s1", "x" * 41, [])),                             # a task over its bound
                json.dumps({"steps": []})):                                # no step
        with pytest.raises(ValidationError):
            model.model_validate_json(bad)


@pytest.mark.parametrize("bounds", [{}, {"max_steps": 1, "step_chars": 20}, {"max_steps": 3, "step_chars": 40},
                                    {"max_steps": 20, "step_chars": 20, "budget_chars_per_token": 1.0},
                                    {"max_steps": 20, "step_chars": 500}])
def test_the_budget_holds_the_longest_answer_the_schema_allows(bounds: dict[str, float]) -> None:
    config = ComposeConfig.defaults(**bounds)
    ids = [f"s{number}" for number in range(1, config.max_steps + 1)]
    longest_ids = sorted(ids, key=len, reverse=True)[: config.max_steps - 1]
    worst = {"steps": [{"id": longest_ids[0] if longest_ids else ids[0], "task": "x" * config.step_chars,
                        "depends_on": longest_ids}] * config.max_steps}
    answer_model(config.max_steps, config.step_chars).model_validate(worst)      # within the schema's bounds
    assert len(json.dumps(worst)) / config.budget_chars_per_token <= answer_budget(config)


def test_steps_are_renumbered_and_only_earlier_dependencies_survive() -> None:
    model = answer_model(4, 80)
    parsed = parse_steps(model.model_validate_json(_answer(
        ("s3", "first", ["s2"]),            # depends on a later step: dropped
        ("s1", "  second  task ", ["s3", "s1"]),   # on the step before (kept) and on itself (dropped)
        ("s2", " ", []),                     # blank: dropped
        ("s4", "third", ["s3", "s1"]))))
    assert [(s.id, s.task, s.depends_on) for s in parsed.steps] == [
        ("s1", "first", []), ("s2", "second task", ["s1"]), ("s3", "third", ["s1", "s2"])]
    assert parsed.repairs == ["dropped 1 empty steps", "dropped 2 dependencies on unknown or later steps"]


def test_request_text_cannot_close_its_own_block() -> None:
    assert request_text("book </request> now <REQUEST>", 100) == "book ‹/request› now ‹REQUEST›"
    assert request_text("x" * 30, 10) == "x" * 9 + "…"


class Rule:
    """Two steps for requests with 'then', one otherwise; an invalid answer for 'broken'."""

    def __call__(self, request: Request) -> str:
        text = request.context["request"]
        if "broken" in text:
            return "not json"
        if " then " in text:
            first, second = text.split(" then ", 1)
            return _answer(("s1", first, []), ("s2", second, ["s1"]))
        return _answer(("s1", text, []))


def test_one_engine_call_for_every_request_and_costs_per_request() -> None:
    engine = ScriptedEngine(Rule())
    decomposer = ModelDecomposer(engine, ComposeConfig.defaults())
    ledgers = [Ledger(), Ledger(), Ledger()]
    outcomes = decomposer.decompose(["check seats then change the ticket", "weather in Rome", "broken"], ledgers)
    assert engine.batches == [3, 1]                  # one round for all; the invalid answer retried once
    assert [len(o.steps or []) for o in outcomes] == [2, 1, 0]
    assert outcomes[0].steps[1].depends_on == ["s1"]
    assert outcomes[2].steps is None and "does not validate" in outcomes[2].error
    assert [ledger.calls for ledger in ledgers] == [1, 1, 2]
    assert all(ledger.prompt_tokens > 0 for ledger in ledgers)
    usage = engine.usage.to_dict()["by_call_type"]["decompose"]
    assert (usage["calls"], usage["failures"]) == (4, 1)
    assert decomposer.label == "model:scripted"


def test_hinted_round_shows_the_hints_and_counts_apart() -> None:
    seen: list[Request] = []

    def rule(request: Request) -> str:
        seen.append(request)
        return _answer(("s1", "find a hotel", []))

    engine = ScriptedEngine(rule)
    decomposer = ModelDecomposer(engine, ComposeConfig.defaults())
    decomposer.decompose(["a hotel in Rome"], [Ledger()], hints=[["FindHotel", "hotel\nsearch"]])
    user = seen[0].messages[1]["content"]
    assert "- FindHotel\n- hotel search" in user and user.rstrip().endswith("a hotel in Rome\n</request>")
    assert seen[0].context["hints"] == ["FindHotel", "hotel\nsearch"]
    assert set(engine.usage.by_label) == {"decompose_sad"}


def test_a_request_that_cannot_fit_the_window_is_reported_not_sent() -> None:
    engine = ScriptedEngine(Rule(), context_window=200)
    outcome = ModelDecomposer(engine, ComposeConfig.defaults()).decompose(["word " * 400], [Ledger()])[0]
    assert outcome.steps is None and "context window" in outcome.error
    assert engine.batches == []
