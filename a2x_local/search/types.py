"""Plain data types of the search stage: what every method (retrieval, A2X, LLM baselines) returns."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, get_args

from a2x_local.costs import AnswerCost
from a2x_local.errors import UserError
from a2x_local.text import check_text

EMPTY_QUERY_HINT = 'say what the agent needs, e.g. a2x-local search "convert currencies"'
# Every selection mode an LLM method may take (a method's spec says which it does): everything that could help,
# what the task needs, the single best service.
Mode = Literal["get_all", "get_important", "get_one"]
MODES: tuple[str, ...] = get_args(Mode)


@dataclass(frozen=True)
class SearchRequest:
    """One query with its own options, so concurrent requests never share mutable state."""

    query: str
    k: int | None = None          # ranked methods: how many to return
    mode: str | None = None       # LLM methods: get_all | get_important | get_one


@dataclass
class Hit:
    """One returned service; ``path`` is the tree path that led to it (A2X methods)."""

    service_id: str
    score: float | None = None
    path: list[str] = field(default_factory=list)


@dataclass(kw_only=True)
class SearchCost(AnswerCost):
    """What one search cost (`AnswerCost`: calls, tokens, rounds), and what its model was shown and could answer."""

    candidates_shown: int = 0
    capped: int = 0               # answers that filled a cap below the list offered: possible silent cuts


@dataclass
class SearchAnswer(SearchCost):
    """A method's answer to one query, with what it cost."""

    query: str
    hits: list[Hit]
    ranked: bool
    seconds: float = 0.0
    trace: dict[str, Any] | None = None
    error: str | None = None

    @property
    def ids(self) -> list[str]:
        return [hit.service_id for hit in self.hits]


class SearchMethod(Protocol):
    """Anything `a2x-local search` and `a2x-local eval` can run."""

    name: str
    ranked: bool

    def search_batch(self, requests: Sequence[SearchRequest]) -> list[SearchAnswer]:
        """Answer many requests together (LLM methods batch their engine rounds across them)."""
        ...


def check_queries(queries: Sequence[str]) -> None:
    """Refuse an empty (or blank) query, or one that is not valid text (`a2x_local.text`), before any work: every
    method's search_batch calls this, and so does the CLI before it loads a method. The error names the query's
    position when a batch holds several."""
    for number, query in enumerate(queries, start=1):
        where = f" (query {number} of {len(queries)})" if len(queries) > 1 else ""
        if not query or not query.strip():
            raise UserError(f"the query is empty{where}", hint=EMPTY_QUERY_HINT, code="EmptyQuery")
        check_text(query, f"the query{where}")
