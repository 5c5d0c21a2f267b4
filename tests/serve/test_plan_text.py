"""The compact text of a plan an agent reads: a named choice and a weak step say so in words."""

from __future__ import annotations

from a2x_local.serve.compact import plan_text


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
