"""SAD helpers: hint selection across steps, the copy-of-hint guard, hint-set overlap."""

from __future__ import annotations

import pytest

from a2x_local.compose.compatibility import jaccard
from a2x_local.compose.sad import copied_steps, hint_ids, hint_names, is_copy, words
from a2x_local.compose.types import Step


def test_hints_take_every_step_in_turn() -> None:
    assert hint_ids([["a", "b", "c"], ["d", "a", "e"]], 4) == ["a", "d", "b", "c"]
    assert hint_ids([["a"], []], 5) == ["a"]
    assert hint_names(["x", "y", "z"], {"x": "Find  Hotel", "y": "Find Hotel", "z": "Zed"}) == ["Find Hotel", "Zed"]


@pytest.mark.parametrize(("task", "copy"), [
    ("getWeatherForecast", True),                 # a bare identifier
    ("get_weather_forecast.", True),
    ("Get weather forecast", True),               # a hint's name in other spelling, nothing more
    ("get the weather forecast for Paris", False),
    ("Weather", False),                           # one plain word is a (vague) task, not an identifier
])
def test_copy_guard(task: str, copy: bool) -> None:
    assert is_copy(task, ["getWeatherForecast", "bookHotel"]) is copy


def test_copied_steps_and_overlap() -> None:
    steps = [Step(id="s1", task="bookHotel"), Step(id="s2", task="book a room near the station")]
    assert copied_steps(steps, ["bookHotel"]) == ["s1"]
    assert words("HTTPServerError_code") == ("http", "server", "error", "code")
    assert jaccard(["a", "b", "c"], ["b", "c", "d"]) == pytest.approx(0.5)
    assert jaccard([], []) == 1.0
