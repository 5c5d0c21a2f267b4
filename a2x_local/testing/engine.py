"""A deterministic engine that answers by rules: a test and benchmark tool, never a product default.

It goes through the same validation, retry and accounting path as the real engines, and counts tokens with a
real Qwen tokenizer, so algorithm tests and cost benchmarks measure what a real model would be sent. Code that
starts its engine itself (the CLI, a server) reaches it by name while `registered_engine` holds one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from a2x_local.llm import (
    Engine,
    RawOutput,
    Request,
    count_text_tokens,
    register_engine,
    truncate_to_tokens,
    unregister_engine,
)

AnswerRule = Callable[[Request], str]


class ScriptedEngine(Engine):
    """Answers each request with ``rule(request)``; an answer longer than the budget is cut off ("length").

    ``before_round(n)`` runs before round ``n`` (1-based) is answered: the seam where a test stops a build mid-way
    (raise in it, or wait there to be killed) without replacing the engine's own methods."""

    name = "scripted"

    def __init__(self, rule: AnswerRule, *, context_window: int = 32768,
                 before_round: Callable[[int], None] | None = None) -> None:
        super().__init__()
        self.rule = rule
        self.context_window = context_window
        self.before_round = before_round
        self.batches: list[int] = []

    @property
    def max_model_len(self) -> int:
        return self.context_window

    def describe(self) -> dict[str, Any]:
        # The rule's kind, not the object: two engines with the same rule are the same "model" (the answer cache).
        return {"engine": self.name, "rule": getattr(self.rule, "__qualname__", type(self.rule).__qualname__)}

    def _generate(self, requests: Sequence[Request]) -> list[RawOutput]:
        if self.before_round is not None:
            self.before_round(len(self.batches) + 1)
        self.batches.append(len(requests))
        outputs = []
        for request in requests:
            text = self.rule(request)
            prompt_tokens = self.count_prompt_tokens(request.messages)
            completion_tokens = count_text_tokens(text)
            if completion_tokens > request.max_tokens:
                outputs.append(RawOutput(truncate_to_tokens(text, request.max_tokens), prompt_tokens,
                                         request.max_tokens, "length"))
            else:
                outputs.append(RawOutput(text, prompt_tokens, completion_tokens, "stop"))
        return outputs


@contextmanager
def registered_engine(name: str, make: Callable[[Any], Engine]) -> Iterator[list[Any]]:
    """Within the block, `--engine NAME` (or `name = NAME` in `[engine]`) starts ``make(engine_settings)``; yields
    the engine settings of every engine asked for, in order. The model needs no folder here: ``--model`` is a label.
    """
    asked: list[Any] = []

    def factory(ref: Any, config: Any) -> Engine:
        asked.append(config)
        return make(config)

    register_engine(name, factory, local_model=False)
    try:
        yield asked
    finally:
        unregister_engine(name)
