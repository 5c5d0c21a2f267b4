"""A step that refers back takes the earlier step's output (inputs_from), carries no connector, and is searched by
its action; a choice that never mentions its step's action is flagged (issue 33, item 7)."""

from __future__ import annotations

from a2x_local.compose import Plan
from a2x_local.compose.coverage import lacks_action
from a2x_local.compose.references import link_inputs, retrieval_text
from a2x_local.compose.rules import rule_steps
from tests.support.paths import DATA

EVERYDAY = "find the weather in Paris tomorrow and email it to my team"


def test_the_second_step_has_no_conjunction_and_takes_the_first_ones_output() -> None:
    first, second = link_inputs(rule_steps(EVERYDAY, 6))
    assert (first.task, second.task) == ("find the weather in Paris tomorrow", "email it to my team")
    assert second.inputs_from == ["s1"] and second.depends_on == ["s1"] and first.inputs_from == []
    assert retrieval_text(second) == "send an email"          # the action, not "it" or "my team"
    assert retrieval_text(first) == first.task


def test_a_step_without_a_reference_back_keeps_its_words_and_takes_no_input() -> None:
    steps = link_inputs(rule_steps("Find the weather in Paris then email the forecast to my team", 6))
    assert steps[1].inputs_from == [] and retrieval_text(steps[1]) == "email the forecast to my team"


def test_a_choice_that_never_mentions_the_steps_action_is_caught() -> None:
    assert lacks_action("email it to my team", frozenset({"get", "team", "inform"})) == "email"
    assert lacks_action("email it to my team", frozenset({"send", "email"})) is None
    assert lacks_action("find the weather in Paris", frozenset({"team"})) is None     # a generic verb


def test_on_the_sample_registry_without_a_model(cli) -> None:
    code, _, err = cli("ingest", str(DATA / "sample"))
    assert code == 0, err
    code, out, err = cli("compose", EVERYDAY, "--method", "bm25", "--k", "3", "--json")
    assert code == 0, err
    plan = Plan.model_validate_json(out)
    assert plan.decomposer == "rule" and len(plan.steps) == 2
    second = plan.steps[1]
    assert second.task == "email it to my team" and second.inputs_from == ["s1"] and "s1" in second.depends_on
    chosen = f"{second.choice.name} {second.choice.id}".lower()
    assert "mail" in chosen, chosen
    code, out, _ = cli("compose", EVERYDAY, "--method", "bm25", "--k", "3")
    assert code == 0 and "takes the output of s1" in out and "s2 email it to my team" in out


