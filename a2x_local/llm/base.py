"""The engine interface: batch in, batch out, order kept, every answer validated, counted and retried once."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from a2x_local.llm.accounting import Usage
from a2x_local.llm.sanitize import GENERIC, MarkerStripper
from a2x_local.llm.tokens import count_chat_tokens
from a2x_local.llm.types import Message, RawOutput, Request, Result, validate


class Engine(ABC):
    """Base of every engine. Subclasses implement ``_generate``: one batch of requests, one backend call.

    ``generate`` adds what every engine must do the same way: control markers stripped from every message content
    (service text is data: sanitize.py; engines with a tokenizer set ``stripper`` to include its special tokens),
    validation against the constraint, one retry with a larger budget for answers that were cut off, invalid or
    errored, and accounting by call type.
    """

    name: str = "engine"
    retry_budget_factor: float = 2.0
    retry_temperature: float = 0.3
    stripper: MarkerStripper = GENERIC
    strip_markers: bool = True          # off only to measure what stripping prevents (scripts/bench_injection.py)

    def __init__(self) -> None:
        self.usage = Usage()

    @property
    def max_model_len(self) -> int | None:
        """Context window in tokens, when known."""
        return None

    def describe(self) -> dict[str, Any]:
        """Engine settings worth recording with a build or an evaluation run."""
        return {"engine": self.name}

    def count_prompt_tokens(self, messages: Sequence[Message]) -> int:
        """Prompt tokens for these messages; engines with their own tokenizer override this."""
        return count_chat_tokens(messages)

    @abstractmethod
    def _generate(self, requests: Sequence[Request]) -> list[RawOutput]:
        """One backend call for the whole batch; returns one RawOutput per request, in order."""

    def generate(self, requests: Sequence[Request]) -> list[Result]:
        """Answer a whole round of requests. Failed answers come back with ``ok`` False, never dropped."""
        requests = [self._as_data(request) for request in requests]
        if not requests:
            return []
        results = self._attempt(requests, attempt=1)
        retry_at = [i for i, result in enumerate(results) if not result.ok]
        if retry_at:
            retried = [self._retry_request(requests[i], results[i]) for i in retry_at]
            second = self._attempt(retried, attempt=2)
            for i, result in zip(retry_at, second, strict=True):
                first = results[i]
                result.prompt_tokens += first.prompt_tokens
                result.completion_tokens += first.completion_tokens
                result.seconds += first.seconds
                results[i] = result
        for request, result in zip(requests, results, strict=True):
            if not result.ok:
                self.usage.record(request.label, failures=1)
        return results

    def _as_data(self, request: Request) -> Request:
        """The request with no control marker left in any message content."""
        if not self.strip_markers:
            return request
        return replace(request, messages=self.stripper.messages(request.messages))

    def _retry_request(self, request: Request, failed: Result) -> Request:
        budget = max(request.max_tokens + 1, int(request.max_tokens * self.retry_budget_factor))
        temperature = request.temperature
        if failed.finish_reason == "invalid":
            # The same greedy decode would repeat the same invalid answer.
            temperature = max(temperature, self.retry_temperature)
        return replace(request, max_tokens=budget, temperature=temperature)

    def _attempt(self, requests: list[Request], *, attempt: int) -> list[Result]:
        self.usage.count_round()
        started = time.perf_counter()
        raw = self._generate(requests)
        if len(raw) != len(requests):
            raise RuntimeError(f"{self.name} returned {len(raw)} answers for {len(requests)} requests")
        elapsed = time.perf_counter() - started
        results = []
        for request, output in zip(requests, raw, strict=True):
            if not output.seconds:
                output.seconds = elapsed / len(requests)
            result = validate(request, output)
            result.attempts = attempt
            self.usage.record(request.label, calls=1, prompt_tokens=output.prompt_tokens,
                              completion_tokens=output.completion_tokens, retries=int(attempt > 1),
                              seconds=output.seconds)
            results.append(result)
        return results

    def close(self) -> None:
        """Release the model (GPU memory, server connections)."""

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
