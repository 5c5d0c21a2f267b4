"""What model work cost, declared once: the engine's tallies per call type and every result (a search answer, a
plan, the server's answers) derive from these types, so the fields and their JSON keys are the same everywhere.

`Cost` is the work a model did: calls (attempts sent, retries included) and their prompt and completion tokens.
`AnswerCost` adds what one answer waited for: the sequential engine rounds (a retry is one more). Rounds are not
work, so a call type's tally has none; an answer's share of shared rounds has both.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields


@dataclass(kw_only=True)
class Cost:
    """Model calls (attempts, retries included) and their tokens."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(kw_only=True)
class AnswerCost(Cost):
    """What one answer cost: its share of the model calls and tokens, and the sequential engine rounds it waited
    for. Searches, plans and the server's answers all carry these fields (under these JSON keys)."""

    rounds: int = 0

    def add(self, other: AnswerCost) -> None:
        """Work done one after the other: tokens, calls and rounds add up."""
        for item in fields(AnswerCost):
            setattr(self, item.name, getattr(self, item.name) + getattr(other, item.name))

    @classmethod
    def side_by_side(cls, costs: Iterable[AnswerCost]) -> AnswerCost:
        """Work done at the same time (in the same engine rounds): tokens and calls add up, rounds are the
        longest."""
        found = list(costs)
        return AnswerCost(calls=sum(c.calls for c in found), prompt_tokens=sum(c.prompt_tokens for c in found),
                          completion_tokens=sum(c.completion_tokens for c in found),
                          rounds=max((c.rounds for c in found), default=0))

