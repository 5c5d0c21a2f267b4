"""The engine interface: batch in, batch out, order kept, every request fit-checked against the context window,
every answer validated, counted and retried once."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from itertools import islice
from typing import Any

from a2x_local.llm.accounting import Usage
from a2x_local.llm.sanitize import GENERIC, MarkerStripper
from a2x_local.llm.tokens import count_chat_tokens
from a2x_local.llm.types import Message, RawOutput, Request, Result, validate

# Chat templates add a handful of special and role tokens per message; this bounds them from above.
_TEMPLATE_TOKENS_PER_MESSAGE = 8


def prompt_tokens_bound(messages: Sequence[Message]) -> int:
    """An upper bound of a chat's prompt tokens without a tokenizer: one token per UTF-8 byte (true of every
    byte-level tokenizer) plus the template's own tokens."""
    return sum(len(m["content"].encode()) + _TEMPLATE_TOKENS_PER_MESSAGE for m in messages) + 2


class Engine(ABC):
    """Base of every engine. Subclasses implement ``_generate``: one batch of requests, one backend call.

    ``generate`` adds what every engine must do the same way: control markers stripped from every message content
    (service text is data: sanitize.py; engines with a tokenizer set ``stripper`` to include its special tokens), a
    fit check (a prompt that cannot fit the context window is never sent, and an answer budget is lowered to what
    the window leaves), validation against the constraint, one retry with a larger budget for answers that were cut
    off, invalid or errored, and accounting by call type.
    """

    name: str = "engine"
    # Requests materialised and in flight at once when a round is streamed (`stream`); a replica engine raises it
    # to keep every replica busy.
    round_chunk: int = 4096
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

    def token_counter(self) -> Callable[[Sequence[Message]], int] | None:
        """A picklable function counting prompt tokens exactly as ``count_prompt_tokens`` does, for a process that
        does not hold this engine (the driver of a replica engine); None when there is none."""
        if type(self).count_prompt_tokens is Engine.count_prompt_tokens:
            return count_chat_tokens
        return None

    def prompt_room(self, messages: Sequence[Message], budget: int, limit: int | None = None) -> int | None:
        """Tokens the context window (and ``limit``, a prompt budget below it) leaves after this prompt and an answer
        of ``budget`` tokens (negative: it does not fit), or None when neither is known. Exact counting runs only
        when the cheap bound says the prompt might not fit."""
        window = self.max_model_len
        if limit and limit > 0:
            window = min(window, limit + budget) if window else limit + budget
        if not window:
            return None
        bound = prompt_tokens_bound(messages)
        if bound + budget <= window:
            return window - bound - budget
        return window - self.count_prompt_tokens(messages) - budget

    def fit(self, request: Request) -> tuple[Request, str | None]:
        """The request as it may be sent (its budget lowered to what the window leaves), or why it cannot be."""
        room = self.prompt_room(request.messages, request.max_tokens)
        if room is None or room >= 0:
            return request, None
        window = self.max_model_len or 0
        answer_room = request.max_tokens + room
        if answer_room < 1:
            tokens = window - answer_room
            return request, (f"not sent: the prompt has {tokens:,} tokens and the model's context window is"
                             f" {window:,} (max_model_len): shorten the prompt or raise --max-model-len")
        return replace(request, max_tokens=answer_room), None

    @abstractmethod
    def _generate(self, requests: Sequence[Request]) -> list[RawOutput]:
        """One backend call for the whole batch; returns one RawOutput per request, in order."""

    def generate(self, requests: Sequence[Request]) -> list[Result]:
        """Answer a whole round of requests. Failed answers come back with ``ok`` False, never dropped."""
        requests = [self._as_data(request) for request in requests]
        if not requests:
            return []
        results = self._attempt(requests, attempt=1)
        # An unsent request (attempts 0) would not fit a second time either.
        retry_at = [i for i, result in enumerate(results) if not result.ok and result.attempts]
        if retry_at:
            retried = [self._retry_request(requests[i], results[i]) for i in retry_at]
            second = self._attempt(retried, attempt=2)
            for i, result in zip(retry_at, second, strict=True):
                first = results[i]
                result.prompt_tokens += first.prompt_tokens
                result.prefix_cached_tokens += first.prefix_cached_tokens
                result.truncated += first.truncated
                result.completion_tokens += first.completion_tokens
                result.seconds += first.seconds
                results[i] = result
        for request, result in zip(requests, results, strict=True):
            if not result.ok:
                self.usage.record(request.label, failures=1)
        return results

    def stream(self, requests: Iterable[Request], *, chunk: int | None = None) -> Iterator[Result]:
        """Answer one round given lazily: ``chunk`` requests (default ``round_chunk``) are taken, sent and answered at
        a time, so a round of a million prompts never sits in memory whole. Results come in request order and the
        whole stream counts as one round (see `Usage.one_round`); each chunk goes through ``generate``, so a cache
        in front stores every chunk's answers as they come."""
        size = max(1, chunk or self.round_chunk)
        iterator = iter(requests)
        with self.usage.one_round():
            while part := list(islice(iterator, size)):
                yield from self.generate(part)

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
        """One backend call for the requests that fit; those that cannot fit come back failed, unsent and
        uncounted as calls (``attempts`` 0, so they are not retried)."""
        results: list[Result | None] = [None] * len(requests)
        send: list[int] = []
        fitted: list[Request] = []
        for i, request in enumerate(requests):
            sendable, problem = self.fit(request)
            if problem:
                results[i] = Result("", None, 0, 0, "error", 0.0, attempts=0, error=problem)
            else:
                send.append(i)
                fitted.append(sendable)
        if not fitted:
            return [r for r in results if r is not None]
        self.usage.count_round(attempt)
        started = time.perf_counter()
        raw = self._generate(fitted)
        if len(raw) != len(fitted):
            raise RuntimeError(f"{self.name} returned {len(raw)} answers for {len(fitted)} requests")
        elapsed = time.perf_counter() - started
        for i, request, output in zip(send, fitted, raw, strict=True):
            if not output.seconds:
                output.seconds = elapsed / len(fitted)
            result = validate(request, output)
            result.attempts = attempt
            result.prefix_cached_tokens = output.prefix_cached_tokens
            result.truncated = int(result.finish_reason == "length")
            self.usage.record(request.label, calls=1, prompt_tokens=output.prompt_tokens,
                              completion_tokens=output.completion_tokens, retries=int(attempt > 1),
                              seconds=output.seconds, prefix_cached_tokens=output.prefix_cached_tokens,
                              truncated=result.truncated)
            results[i] = result
        return [r for r in results if r is not None]

    def reset_prefix_cache(self) -> bool:
        """Forget the prompt prefixes the engine has cached, so a measurement starts cold; False when the engine
        keeps none it can drop (a remote server, or no prefix cache)."""
        return False

    def close(self) -> None:
        """Release the model (GPU memory, server connections)."""

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
