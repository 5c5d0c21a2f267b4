"""`Engine.generate`: order, validation, one retry with a larger budget, accounting by call type (no model)."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from a2x_local.llm import Engine, JsonConstraint, RegexConstraint, Request
from a2x_local.llm.types import ChoiceConstraint, RawOutput
from a2x_local.testing import ScriptedEngine


class Answer(BaseModel):
    n: int


class FakeBackend(Engine):
    """Replays scripted raw outputs per request text and records every request it was sent."""

    name = "fake"

    def __init__(self, script: dict[str, list[RawOutput]]) -> None:
        super().__init__()
        self.script = {key: list(values) for key, values in script.items()}
        self.sent: list[list[Request]] = []

    def _generate(self, requests: Sequence[Request]) -> list[RawOutput]:
        self.sent.append(list(requests))
        return [self.script[r.messages[0]["content"]].pop(0) for r in requests]


def ask(text: str, constraint, **kwargs) -> Request:
    return Request([{"role": "user", "content": text}], constraint, **kwargs)


def test_cut_off_answer_is_retried_once_with_twice_the_budget_and_tokens_add_up() -> None:
    engine = FakeBackend({"a": [RawOutput('{"n": 1', 10, 8, "length"), RawOutput('{"n": 12}', 10, 9, "stop")],
                          "b": [RawOutput("7", 5, 1, "stop")]})
    results = engine.generate([ask("a", JsonConstraint(Answer), max_tokens=8, label="design"),
                               ask("b", RegexConstraint("[0-9]"), max_tokens=8, label="assign")])
    assert [r.value for r in results] == [Answer(n=12), "7"]
    assert results[0].attempts == 2 and results[0].prompt_tokens == 20 and results[0].completion_tokens == 17
    assert [len(batch) for batch in engine.sent] == [2, 1]
    assert engine.sent[1][0].max_tokens == 16
    design = engine.usage.by_label["design"]
    assert (design.calls, design.retries, design.failures) == (2, 1, 0)
    assert (design.prompt_tokens, design.completion_tokens) == (20, 17)
    assert engine.usage.by_label["assign"].calls == 1 and engine.usage.rounds == 2


def test_twice_invalid_answer_is_reported_failed_not_dropped_and_retried_warmer() -> None:
    engine = FakeBackend({"a": [RawOutput("maybe", 4, 2, "stop"), RawOutput("perhaps", 4, 2, "stop")]})
    [result] = engine.generate([ask("a", ChoiceConstraint(("yes", "no")), label="check")])
    assert not result.ok and result.value is None and result.finish_reason == "invalid"
    assert "not one of" in result.error and result.attempts == 2
    assert engine.sent[1][0].temperature >= engine.retry_temperature
    assert engine.usage.by_label["check"].failures == 1


def test_length_twice_is_reported_as_length_with_text_kept() -> None:
    engine = FakeBackend({"a": [RawOutput("12", 3, 2, "length"), RawOutput("1234", 3, 4, "length")]})
    [result] = engine.generate([ask("a", RegexConstraint("[0-9]{9}"), max_tokens=2)])
    assert result.finish_reason == "length" and result.text == "1234" and result.value is None
    assert result.error == "answer cut off at 4 tokens"


def test_engine_errors_become_failed_results() -> None:
    engine = FakeBackend({"a": [RawOutput("", 0, 0, "error", error="boom"),
                                RawOutput("", 0, 0, "error", error="boom again")]})
    [result] = engine.generate([ask("a", RegexConstraint("x"))])
    assert result.finish_reason == "error" and result.error == "boom again"


def test_scripted_engine_multi_item_answer_passes_validation_unchanged() -> None:
    engine = ScriptedEngine(lambda request: "2,5,7")
    [result] = engine.generate([ask("pick", RegexConstraint(r"NONE|[1-9][0-9]?(,[1-9][0-9]?){0,9}"))])
    assert result.ok and result.value == "2,5,7"


class SmallWindow(FakeBackend):
    """A backend with a known context window."""

    def __init__(self, script: dict[str, list[RawOutput]], window: int) -> None:
        super().__init__(script)
        self.window = window

    @property
    def max_model_len(self) -> int:
        return self.window


def test_a_prompt_that_cannot_fit_is_never_sent_nor_retried_and_its_neighbours_are() -> None:
    long = "word " * 400
    engine = SmallWindow({long: [], "b": [RawOutput("7", 5, 1, "stop")]}, window=200)
    results = engine.generate([ask(long, RegexConstraint("[0-9]"), max_tokens=4, label="design"),
                               ask("b", RegexConstraint("[0-9]"), max_tokens=4, label="design")])
    assert [len(batch) for batch in engine.sent] == [1] and engine.sent[0][0].messages[0]["content"] == "b"
    unsent, sent = results
    assert not unsent.ok and unsent.attempts == 0 and unsent.finish_reason == "error"
    assert "not sent" in unsent.error and "context window is 200" in unsent.error
    assert sent.ok and sent.value == "7"
    stats = engine.usage.by_label["design"]
    assert (stats.calls, stats.failures, stats.retries) == (1, 1, 0) and engine.usage.rounds == 1


def test_a_budget_larger_than_the_room_left_is_lowered_to_it() -> None:
    engine = SmallWindow({"a": [RawOutput("7", 5, 1, "stop")]}, window=300)
    tokens = engine.count_prompt_tokens([{"role": "user", "content": "a"}])
    [result] = engine.generate([ask("a", RegexConstraint("[0-9]"), max_tokens=1000)])
    assert result.ok and engine.sent[0][0].max_tokens == 300 - tokens


def test_when_nothing_fits_no_backend_call_is_made() -> None:
    engine = SmallWindow({}, window=20)
    [result] = engine.generate([ask("word " * 50, RegexConstraint("[0-9]"), max_tokens=4)])
    assert not result.ok and engine.sent == [] and engine.usage.rounds == 0
