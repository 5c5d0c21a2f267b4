"""Plain data types of the search stage: what every method (retrieval, A2X, LLM baselines) returns."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, get_args, runtime_checkable

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
    """What one search cost (`AnswerCost`: calls, tokens, rounds), what its model was shown and could answer, what
    kept a model that decides badly from running away (docs/search.md "Budgets"), and how its model chose among the
    options shown (the evaluation's position-bias measure)."""

    candidates_shown: int = 0
    capped: int = 0               # answers that filled a cap below the list offered: possible silent cuts
    overselected: int = 0         # descent answers that chose too much of a node: only overselect_keep expanded
    budget_cut: int = 0           # requests not sent because the query's call or token budget was spent
    truncated: int = 0            # answers cut off at their token budget (each attempt)
    choices: int = 0              # valid answers that chose among two or more options (NONE aside)
    first_choices: int = 0        # ... of which took the first option shown
    uniform_first: float = 0.0    # ... of which a choice blind to position would take the first (sum of chosen/offered)
    # By position (1-based, the first POSITIONS_TRACKED): answers that took it, and how many a choice blind to position
    # would (sum of chosen/offered over answers that showed it), so a model that always picks, say, the 10th is seen.
    position_choices: dict[str, int] = field(default_factory=dict)
    position_blind: dict[str, float] = field(default_factory=dict)


@dataclass
class SearchAnswer:
    """A method's answer to one query, with what it cost: ``cost`` holds the query's own share (an answer is not a
    cost, so nothing copies cost fields between them)."""

    query: str
    hits: list[Hit]
    ranked: bool
    seconds: float = 0.0
    trace: dict[str, Any] | None = None
    error: str | None = None
    cost: SearchCost = field(default_factory=SearchCost)

    @property
    def ids(self) -> list[str]:
        return [hit.service_id for hit in self.hits]


class SearchMethod(ABC):
    """Anything `a2x-local search`, `a2x-local eval` and the server can run. A method answers `search_batch`;
    `describe`, `close` and `warm_up` have defaults, so callers call them on every method and never probe for
    them."""

    name: str = "method"
    ranked: bool = True           # whether hits come best first (retrieval) or as a set the model chose

    @abstractmethod
    def search_batch(self, requests: Sequence[SearchRequest]) -> list[SearchAnswer]:
        """Answer many requests together (LLM methods batch their engine rounds across them)."""

    def describe(self) -> dict[str, Any]:
        """What the method runs on (model, index, tree), JSON-able; recorded with evaluations, shown by servers."""
        return {"method": self.name}

    def close(self) -> None:
        """Release what the method holds (an engine it started, worker threads); nothing by default."""

    def warm_up(self) -> None:
        """Pay the first query's one-time costs now (a server preloading methods); nothing by default, so no
        model is ever called for it."""


@runtime_checkable
class Retriever(Protocol):
    """Ranked retrieval for a batch of queries: what dense, bm25 and hybrid offer besides `search_batch`, and what
    the LLM methods take as a pre-filter or ranker."""

    name: str

    def retrieve(self, queries: Sequence[str], k: int) -> list[list[Hit]]: ...


def check_queries(queries: Sequence[str]) -> None:
    """Refuse an empty (or blank) query, or one that is not valid text (`a2x_local.text`), before any work: every
    method's search_batch calls this, and so does the CLI before it loads a method. The error names the query's
    position when a batch holds several."""
    for number, query in enumerate(queries, start=1):
        where = f" (query {number} of {len(queries)})" if len(queries) > 1 else ""
        if not query or not query.strip():
            raise UserError(f"the query is empty{where}", hint=EMPTY_QUERY_HINT, code="EmptyQuery")
        check_text(query, f"the query{where}")
