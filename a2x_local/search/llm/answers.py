"""What every LLM search method shares around its engine rounds: request checks and answer assembly."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from a2x_local.search.llm.descent import NodeDecision
from a2x_local.search.llm.selection import Selection
from a2x_local.search.methods import check_mode
from a2x_local.search.types import MODES, Hit, SearchAnswer, SearchCost, SearchRequest, check_queries


def checked_modes(requests: Sequence[SearchRequest], default_mode: str, method: str) -> list[str]:
    """Each request's mode (``default_mode`` when it gives none); an empty query or a mode the method does not take
    stops the batch before any model call."""
    check_queries([request.query for request in requests])
    return [str(check_mode(method, MODES, request.mode, default=default_mode)) for request in requests]


def failure(selection: Selection, decisions: Sequence[NodeDecision] = ()) -> str | None:
    """Why a query's answer is an error rather than a miss, or None.

    A query failed when its selection stage produced no valid answer: it made selection calls and every one of
    them failed (the engine unreachable, answers that never validated), or it made none because every descent call
    failed. Then its empty (or fallback) answer says nothing about the query, so the evaluation counts it as an
    error and a rerun retries it. One valid answer, NONE included, makes the query a normal answer.
    """
    calls: Sequence[Any] = selection.calls or decisions
    errors = [call.error for call in calls if call.error]
    if not calls or len(errors) < len(calls):
        return None
    stage = "selection" if selection.calls else "descent"
    return f"all {len(calls)} {stage} calls failed, e.g. {errors[0]}"


def make_answer(request: SearchRequest, hits: list[Hit], ledger: SearchCost, seconds: float,
                trace: dict[str, Any], error: str | None = None) -> SearchAnswer:
    """A SearchAnswer carrying the query's own share of model calls, tokens and rounds."""
    return SearchAnswer(query=request.query, hits=hits, ranked=False, seconds=seconds, trace=trace, error=error,
                        cost=ledger)
