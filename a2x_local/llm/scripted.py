"""A deterministic engine that answers by rules: a test and benchmark tool, never a product default.

It goes through the same validation, retry and accounting path as the real engines, and counts tokens with a
real Qwen tokenizer, so algorithm tests and cost benchmarks measure what a real model would be sent.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from a2x_local.llm.base import Engine
from a2x_local.llm.tokens import count_chat_tokens, count_text_tokens, truncate_to_tokens
from a2x_local.llm.types import RawOutput, Request

AnswerRule = Callable[[Request], str]


class ScriptedEngine(Engine):
    """Answers each request with ``rule(request)``; an answer longer than the budget is cut off ("length")."""

    name = "scripted"

    def __init__(self, rule: AnswerRule, *, context_window: int = 32768) -> None:
        super().__init__()
        self.rule = rule
        self.context_window = context_window
        self.batches: list[int] = []

    @property
    def max_model_len(self) -> int:
        return self.context_window

    def describe(self) -> dict[str, Any]:
        # The rule's kind, not the object: two engines with the same rule are the same "model" (the answer cache).
        return {"engine": self.name, "rule": getattr(self.rule, "__qualname__", type(self.rule).__qualname__)}

    def _generate(self, requests: Sequence[Request]) -> list[RawOutput]:
        self.batches.append(len(requests))
        outputs = []
        for request in requests:
            text = self.rule(request)
            prompt_tokens = count_chat_tokens(request.messages)
            completion_tokens = count_text_tokens(text)
            if completion_tokens > request.max_tokens:
                outputs.append(RawOutput(truncate_to_tokens(text, request.max_tokens), prompt_tokens,
                                         request.max_tokens, "length"))
            else:
                outputs.append(RawOutput(text, prompt_tokens, completion_tokens, "stop"))
        return outputs
