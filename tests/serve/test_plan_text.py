"""The compact text of a plan an agent reads: a named choice and a weak step say so in words."""

from __future__ import annotations

from a2x_local.compose.types import Candidate, Plan, PlanStep, SadReport
from a2x_local.serve.compact import plan_text
from a2x_local.serve.compose_api import brief_plan


def _step(step_id: str, task: str, choice: dict, **extra) -> dict:
    return {"id": step_id, "task": task, "group": 1, "depends_on": [], "choice": choice, "alternatives": [],
            **extra}


def test_a_named_choice_and_a_weak_step_are_marked() -> None:
    plan = {"request": "open a Jira ticket then ping the team", "decomposer": "rule", "method": "hybrid",
            "groups": [["s1", "s2"]],
            "steps": [_step("s1", "open a Jira ticket", {"id": "jira", "name": "Jira", "named": True},
                            confidence=1.0, low_confidence=False),
                      _step("s2", "then ping the team", {"id": "hub", "name": "notifyHub", "named": False},
                            confidence=0.31, low_confidence=True)]}
    first, second = plan_text(plan).splitlines()[1:3]
    assert "(named in the request)" in first and "LOW CONFIDENCE" not in first
    assert "(named in the request)" not in second and "LOW CONFIDENCE: ask the user" in second


def test_the_brief_plan_keeps_named_only_where_true_and_no_scoring() -> None:
    def candidate(service_id: str, named: bool) -> Candidate:
        return Candidate(id=service_id, name=service_id, rank=1, similarity=0.5, score=0.5, named=named,
                         rival_cosine=0.1, signals={"keywords": 0.2})

    plan = Plan(request="r", decomposer="rule", method="hybrid", sad=SadReport(applied=False), steps=[
        PlanStep(id="s1", task="t", query="t", group=1, choice=candidate("jira", True),
                 alternatives=[candidate("hub", False)], confidence=1.0)])
    step = brief_plan(plan, "brief")["steps"][0]
    assert step["choice"] == {"id": "jira", "name": "jira", "score": 0.5, "named": True}
    assert step["alternatives"] == [{"id": "hub", "name": "hub", "score": 0.5}]
    assert brief_plan(plan, "full")["steps"][0]["alternatives"][0]["rival_cosine"] == 0.1
