"""Requests and checks shared by the engine tests (vllm, transformers, openai) on the tiny random model.

The model's text is nonsense: these checks assert that answers validate, flow and are counted, never their content.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from a2x_local.llm import JsonConstraint, RegexConstraint, Request, Result
from a2x_local.llm.types import ChoiceConstraint

POSITIONS = r"NONE|[1-9][0-9]?(,[1-9][0-9]?){0,9}"
OPTIONS = ("sales", "sales lead", "support", "NONE")
SCRIPTED = "2,5,7"
BATCH = 32


class Pick(BaseModel):
    """A bounded schema, as every stage's schemas are: enums, short strings, short lists of small numbers."""

    category: Literal["billing", "search", "travel"]
    reason: str = Field(max_length=24)
    ids: list[Annotated[int, Field(ge=1, le=99)]] = Field(min_length=1, max_length=3)


CASES = {"json": (JsonConstraint(Pick), 64), "regex": (RegexConstraint(POSITIONS), 40),
         "choice": (ChoiceConstraint(OPTIONS), 8)}


def messages(i: int) -> list[dict[str, str]]:
    """Shared instructions first (prefix caching), then a request-specific part of varying length."""
    return [{"role": "system", "content": "You classify services. Answer in the required format."},
            {"role": "user", "content": f"Service {i}: " + "books flights and hotels " * (1 + i % 5)}]


def batch(kind: str, n: int = BATCH, label: str | None = None) -> list[Request]:
    constraint, budget = CASES[kind]
    return [Request(messages(i), constraint, max_tokens=budget, label=label or f"test-{kind}") for i in range(n)]


def assert_valid(kind: str, results: Sequence[Result]) -> None:
    failed = [(r.finish_reason, r.error, r.text[:60]) for r in results if not r.ok]
    assert not failed, failed
    for result in results:
        assert result.finish_reason == "stop" and result.attempts == 1
        if kind == "json":
            assert isinstance(result.value, Pick)
        elif kind == "regex":
            assert RegexConstraint(POSITIONS).parse(result.value) == result.text
        else:
            assert result.value in OPTIONS


def assert_token_counts(results: Sequence[Result], requests: Sequence[Request], tokenizer) -> None:
    """Prompt tokens equal the model tokenizer's count of the chat; completions are positive and plausible."""
    for request, result in zip(requests, results, strict=True):
        expected = tokenizer.apply_chat_template([dict(m) for m in request.messages], add_generation_prompt=True,
                                                 tokenize=True, return_dict=False)
        assert result.prompt_tokens == len(expected)
        # Every token is at least one byte; the end-of-turn token counts as generated.
        assert 1 <= result.completion_tokens <= len(result.text.encode("utf-8")) + 1
        assert result.completion_tokens <= request.max_tokens


def cut_off_request(label: str) -> Request:
    """Cannot finish: at least 200 letters are required, the budget is 2 tokens (4 on the retry)."""
    return Request(messages(0), RegexConstraint("[a-z]{200}"), max_tokens=2, label=label)


def assert_cut_off(result: Result) -> None:
    assert result.finish_reason == "length" and not result.ok and result.value is None
    assert result.attempts == 2 and result.completion_tokens == 2 + 4
    assert result.error == "answer cut off at 4 tokens" and result.text


def scripted_requests(tokenizer) -> tuple[list[Request], list[int]]:
    """Two multi-item questions whose model is forced to answer "2,5,7" then end its turn."""
    forced = [*tokenizer.encode(SCRIPTED, add_special_tokens=False), tokenizer.convert_tokens_to_ids("<|im_end|>")]
    context = {"force_tokens": forced}
    return [Request(messages(1), RegexConstraint(POSITIONS), max_tokens=16, label="test-scripted", context=context),
            Request(messages(2), ChoiceConstraint(("2", "2,5", SCRIPTED)), max_tokens=16, label="test-scripted",
                    context=context)], forced
