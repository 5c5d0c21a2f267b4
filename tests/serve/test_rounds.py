"""Shared engine rounds: concurrent generate() calls become one engine call; a failure stays with its caller."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import pytest

from a2x_local.llm.types import ChoiceConstraint, RawOutput, Request
from a2x_local.serve.rounds import SharedRounds
from a2x_local.testing import ScriptedEngine


def _requests(tag: str, n: int) -> list[Request]:
    return [Request(messages=[{"role": "user", "content": f"{tag}-{i}"}], constraint=ChoiceConstraint(("a", "b")),
                    label="test", context={"tag": tag}) for i in range(n)]


def _in_threads(engine: SharedRounds, calls: dict[str, list[Request]]) -> dict[str, object]:
    """Run each call on its own thread at (nearly) the same time; what each got back or raised."""
    outcomes: dict[str, object] = {}
    start = threading.Barrier(len(calls))

    def call(tag: str) -> None:
        start.wait()
        try:
            outcomes[tag] = engine.generate(calls[tag])
        except Exception as exc:
            outcomes[tag] = exc

    threads = [threading.Thread(target=call, args=(tag,)) for tag in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return outcomes


def test_concurrent_calls_share_one_engine_round_and_get_their_own_answers():
    inner = ScriptedEngine(lambda request: "a" if request.context["tag"] == "x" else "b")
    rounds: list[int] = []
    engine = SharedRounds(inner, window_s=0.5, max_prompts=100, on_round=rounds.append)
    try:
        outcomes = _in_threads(engine, {"x": _requests("x", 3), "y": _requests("y", 2), "z": _requests("z", 4)})
    finally:
        engine.close()
    assert inner.batches == [9] and rounds == [9]
    assert [r.value for r in outcomes["x"]] == ["a"] * 3
    assert [r.value for r in outcomes["y"]] == ["b"] * 2 and len(outcomes["z"]) == 4
    assert engine.usage is inner.usage and inner.usage.by_label["test"].calls == 9


def test_a_round_never_passes_its_prompt_limit_nor_splits_a_call():
    inner = ScriptedEngine(lambda request: "a")
    engine = SharedRounds(inner, window_s=0.3, max_prompts=5)
    try:
        outcomes = _in_threads(engine, {"x": _requests("x", 3), "y": _requests("y", 3), "z": _requests("z", 2)})
    finally:
        engine.close()
    assert sorted(inner.batches) == [3, 5] and all(len(outcomes[t]) == n for t, n in (("x", 3), ("y", 3), ("z", 2)))


class FailsOn(ScriptedEngine):
    """Raises for any batch that holds a request tagged ``bad`` (as a backend that rejects a whole batch would)."""

    def _generate(self, requests: Sequence[Request]) -> list[RawOutput]:
        if any(request.context["tag"] == "bad" for request in requests):
            raise RuntimeError("backend rejected the batch")
        return super()._generate(requests)


def test_a_failing_call_fails_alone_when_its_round_was_shared():
    inner = FailsOn(lambda request: "a")
    engine = SharedRounds(inner, window_s=0.5, max_prompts=100)
    try:
        outcomes = _in_threads(engine, {"good": _requests("good", 2), "bad": _requests("bad", 1),
                                        "fine": _requests("fine", 3)})
    finally:
        engine.close()
    assert isinstance(outcomes["bad"], RuntimeError)
    assert [r.value for r in outcomes["good"]] == ["a", "a"] and len(outcomes["fine"]) == 3


def test_closing_answers_waiting_callers_and_refuses_new_ones():
    engine = SharedRounds(ScriptedEngine(lambda request: "a"), window_s=0.0, max_prompts=10)
    assert [r.value for r in engine.generate(_requests("x", 1))] == ["a"]
    engine.close()
    with pytest.raises(RuntimeError, match="closed"):
        engine.generate(_requests("x", 1))


def test_a_round_starts_as_soon_as_every_participant_waits():
    inner = ScriptedEngine(lambda request: "a")
    engine = SharedRounds(inner, window_s=5.0, max_prompts=100)  # a window no test would sit out
    outcomes: dict[str, float] = {}
    registered = threading.Barrier(2)

    def search(tag: str, calls: int) -> None:
        with engine.participant():
            if tag != "lone":
                registered.wait()  # both searches are running before either asks the engine
            started = time.monotonic()
            for _ in range(calls):
                engine.generate(_requests(tag, 2))
            outcomes[tag] = time.monotonic() - started

    try:
        lone = threading.Thread(target=search, args=("lone", 2))
        lone.start()
        lone.join(timeout=30)
        pair = [threading.Thread(target=search, args=(tag, 3)) for tag in ("x", "y")]
        for thread in pair:
            thread.start()
        for thread in pair:
            thread.join(timeout=30)
    finally:
        engine.close()
    assert outcomes["lone"] < 2.0 and outcomes["x"] < 2.0 and outcomes["y"] < 2.0
    assert inner.batches[:2] == [2, 2] and inner.batches[2:] == [4, 4, 4]


class Slow(ScriptedEngine):
    def _generate(self, requests: Sequence[Request]) -> list[RawOutput]:
        time.sleep(0.2)
        return super()._generate(requests)


def test_searches_coming_back_from_a_round_join_the_next_one():
    """A call made while a round runs waits for the searches of that round, rather than going alone and leaving
    them the round after (two groups taking turns, each round half full)."""
    inner = Slow(lambda request: "a")
    engine = SharedRounds(inner, window_s=0.1, max_prompts=100)
    both = threading.Barrier(2)

    def x() -> None:
        with engine.participant():
            both.wait()
            engine.generate(_requests("x", 1))   # round 1 (y is busy elsewhere until the window ends)
            engine.generate(_requests("x", 1))   # back at once: joins y's call in round 2

    def y() -> None:
        with engine.participant():
            both.wait()
            time.sleep(0.2)                       # arrives while round 1 runs
            engine.generate(_requests("y", 1))

    threads = [threading.Thread(target=x), threading.Thread(target=y)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
    finally:
        engine.close()
    assert inner.batches == [1, 2]
