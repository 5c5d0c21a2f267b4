"""The one request/result language every stage speaks to every engine."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

Message = Mapping[str, str]
FinishReason = Literal["stop", "length", "invalid", "error"]


@dataclass(frozen=True)
class JsonConstraint:
    """The answer is JSON matching a pydantic model (bound every string and list: see README, engines)."""

    model: type[BaseModel]

    @property
    def kind(self) -> str:
        return "json"

    def schema(self) -> dict[str, Any]:
        """The model's JSON schema, computed once per model class (engines ask on every request); do not mutate it."""
        return _json_schema(self.model)

    def parse(self, text: str) -> BaseModel:
        return self.model.model_validate_json(text)


@dataclass(frozen=True)
class RegexConstraint:
    """The answer matches a regular expression in full."""

    pattern: str

    @property
    def kind(self) -> str:
        return "regex"

    def parse(self, text: str) -> str:
        if re.fullmatch(self.pattern, text) is None:
            raise ValueError(f"answer {text[:80]!r} does not match /{self.pattern}/")
        return text


@dataclass(frozen=True)
class ChoiceConstraint:
    """The answer is exactly one of a few strings."""

    options: tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.options:
            raise ValueError("a choice needs at least one option")

    @property
    def kind(self) -> str:
        return "choice"

    def parse(self, text: str) -> str:
        if text not in self.options:
            raise ValueError(f"answer {text[:80]!r} is not one of {len(self.options)} options")
        return text


Constraint = JsonConstraint | RegexConstraint | ChoiceConstraint


@cache
def _json_schema(model: type[BaseModel]) -> dict[str, Any]:
    return model.model_json_schema()


@dataclass(frozen=True)
class Request:
    """Chat messages, an output constraint and a budget. ``label`` names the call type for accounting.

    ``context`` carries structured facts about the request (the ids behind offered positions, the node being
    split, ...). It is never sent to a model: scripted test engines answer from it and logs print it.
    """

    messages: Sequence[Message]
    constraint: Constraint
    max_tokens: int = 256
    label: str = "default"
    temperature: float = 0.0
    seed: int | None = None
    context: Mapping[str, Any] = field(default_factory=dict)


# A request's extra arguments for vLLM's sampling (`SamplingParams.extra_args`; `vllm_xargs` on vLLM's server): what a
# custom logits processor loaded into vLLM reads. None: none for that request.
ExtraArgs = Callable[[Request], Mapping[str, Any] | None]


@dataclass
class Result:
    """One answer. ``ok`` is False when the text never validated; ``value`` is then None and ``error`` says why.
    ``cached``: read from the answer cache, never sent (no tokens, no attempts). ``prefix_cached_tokens``: prompt
    tokens the engine served from its prefix cache (as the engine reports it; 0 when it does not). ``truncated``:
    attempts whose answer was cut off at its token budget (finish reason "length"), the retry's included."""

    text: str
    value: Any
    prompt_tokens: int
    completion_tokens: int
    finish_reason: FinishReason
    seconds: float
    attempts: int = 1
    error: str | None = None
    cached: bool = False
    prefix_cached_tokens: int = 0
    truncated: int = 0

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class RawOutput:
    """What an engine backend returns before validation."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: Literal["stop", "length", "error"]
    seconds: float = 0.0
    error: str | None = None
    prefix_cached_tokens: int = 0


def validate(request: Request, raw: RawOutput) -> Result:
    """Turn raw text into a Result: parsed when complete and valid, an explained failure otherwise."""
    if raw.finish_reason == "error":
        return Result(raw.text, None, raw.prompt_tokens, raw.completion_tokens, "error", raw.seconds,
                      error=raw.error or "engine error")
    if raw.finish_reason == "length":
        return Result(raw.text, None, raw.prompt_tokens, raw.completion_tokens, "length", raw.seconds,
                      error=f"answer cut off at {request.max_tokens} tokens")
    try:
        value = request.constraint.parse(raw.text)
    except (ValidationError, ValueError) as exc:
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return Result(raw.text, None, raw.prompt_tokens, raw.completion_tokens, "invalid", raw.seconds,
                      error=f"answer does not validate: {message}")
    return Result(raw.text, value, raw.prompt_tokens, raw.completion_tokens, "stop", raw.seconds)
