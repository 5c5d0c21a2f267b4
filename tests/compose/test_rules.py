"""The rule decomposer: strong connectors split, everything else stays one step (so single needs search as is)."""

from __future__ import annotations

import pytest

from a2x_local.compose.rules import rule_steps


def _tasks(request: str, max_steps: int = 6) -> list[tuple[str, list[str]]]:
    return [(step.task, step.depends_on) for step in rule_steps(request, max_steps)]


@pytest.mark.parametrize("request_text", [
    "Change my ticket from MU2336 to MU2335.",
    "Find flights and hotels in Rome for next week.",             # "and" alone never splits
    "Next Monday I need a table for two. It should be quiet.",    # "Next" without a comma opens no need
    "Then thanks.",                                               # too short to be a need of its own
    "If it rains tomorrow, then book me a taxi to the office.",   # a first-sentence condition is one need
])
def test_single_needs_stay_one_step_with_the_request_text(request_text: str) -> None:
    steps = rule_steps(request_text, 6)
    assert [(s.id, s.task, s.depends_on) for s in steps] == [("s1", " ".join(request_text.split()), [])]


def test_ordering_connectors_make_dependencies_and_additive_ones_do_not() -> None:
    assert _tasks("Check whether flight MU2335 has seats, then change my ticket from MU2336 to MU2335. "
                  "Also find me a hotel near the airport.") == [
        ("Check whether flight MU2335 has seats", []),
        ("change my ticket from MU2336 to MU2335.", ["s1"]),
        ("find me a hotel near the airport.", []),
    ]
    assert _tasks("Find popular movies. Additionally, tell me where to stream them, and then email me the list.") == [
        ("Find popular movies.", []), ("tell me where to stream them", []), ("email me the list.", ["s2"])]


def test_context_sentences_stay_with_their_step_and_conditions_depend_on_it() -> None:
    assert _tasks("Check the availability of mybusiness.com. It is for my shop. If it is available, then give me "
                  "its WHOIS record.") == [
        ("Check the availability of mybusiness.com. It is for my shop.", []),
        ("If it is available, give me its WHOIS record.", ["s1"])]


def test_chinese_connectors() -> None:
    assert _tasks("请帮我查一下北京明天的天气，然后帮我预订一个下午三点的会议。另外把结果发到我的邮箱。") == [
        ("请帮我查一下北京明天的天气", []), ("帮我预订一个下午三点的会议。", ["s1"]), ("把结果发到我的邮箱。", [])]


def test_at_most_max_steps_the_rest_joins_the_last() -> None:
    steps = rule_steps("Get the weather in Paris. Then book a hotel there. Also rent a car for me. "
                       "Finally send me the summary by email.", 2)
    assert [s.task for s in steps] == [
        "Get the weather in Paris.",
        "book a hotel there. Also rent a car for me. Finally send me the summary by email."]
    assert steps[1].depends_on == ["s1"]
