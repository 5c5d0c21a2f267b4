"""What every LLM search method shares around its engine rounds: request checks and answer assembly."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from a2x_local.errors import UserError
from a2x_local.search.llm_config import check_mode
from a2x_local.search.rounds import Ledger
from a2x_local.search.types import Hit, SearchAnswer, SearchRequest


def checked_modes(requests: Sequence[SearchRequest], default_mode: str) -> list[str]:
    """Each request's mode; an empty query or unknown mode stops the batch before any model call."""
    for number, request in enumerate(requests, start=1):
        if not request.query or not request.query.strip():
            where = f"query {number} of {len(requests)}" if len(requests) > 1 else "the query"
            raise UserError(f"{where} is empty: there is nothing to search for",
                            hint="pass the request as text, e.g. a2x-local search \"book a flight to Paris\"")
    return [check_mode(request.mode, default_mode) for request in requests]


def make_answer(request: SearchRequest, hits: list[Hit], ledger: Ledger, seconds: float,
                trace: dict[str, Any]) -> SearchAnswer:
    """A SearchAnswer carrying the query's own share of model calls, tokens and rounds."""
    return SearchAnswer(query=request.query, hits=hits, ranked=False, prompt_tokens=ledger.prompt_tokens,
                        completion_tokens=ledger.completion_tokens, calls=ledger.calls, rounds=ledger.rounds,
                        candidates_shown=ledger.candidates_shown, seconds=seconds, trace=trace)
