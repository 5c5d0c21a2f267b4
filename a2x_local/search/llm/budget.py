"""What keeps a model that decides badly from running away: a per-query budget, a fallback for answers that choose
too much, and the order in which a query's options are kept when not all of them can be.

- **Over-selection.** A descent answer that chooses more than `overselect_share` of a node's options, and more than
  `overselect_keep` of them, says little about the request (a weak model often answers "all of them"): only
  `overselect_keep` of the chosen options are expanded, those first in the query's order (below), and the answer is
  counted (`overselected`).
- **Budget.** A query may send at most `max_calls_per_query` model calls and `max_prompt_tokens_per_query` prompt
  tokens (0: no limit). The descent may spend at most half of each, so the selection of what it reached always has
  room; the selection spends what is left. What does not fit is not sent, the requests first in the query's order
  are kept, and every request left out is counted (`budget_cut`). A retry the engine makes may take a query past its
  budget by the calls it retried in its last round.
- **The query's order.** With a ranking of the registry for the query (the hybrid retriever's, the `[retrieval]`
  extra), an option or list comes first when a service in it ranks higher; without one (the extra is not installed),
  the one holding more services comes first (more services: likelier to hold what the request needs), then the
  order shown. The ranking is asked for only for queries that need it, one retrieval call per round for all of them.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from a2x_local.llm import Engine, Request, prompt_tokens_bound
from a2x_local.search.llm.config import LlmSearchConfig
from a2x_local.search.types import Retriever, SearchCost

if TYPE_CHECKING:
    from a2x_local.search.types import Hit

# Share of a query's budget the descent may spend: the selection of what it reached keeps the rest.
DESCENT_SHARE = 0.5


class Ranking:
    """Per query, where each service stands in the hybrid retriever's ranking for it (0 = best), fetched on demand.

    ``ranker`` is a function that gives the retriever when first needed (so the indexes load only for a query
    that needs them) or None when retrieval is not installed, or not wanted; it may give None too. ``depth``
    services are ranked per query, the others come after them.
    """

    def __init__(self, ranker: Callable[[], Retriever | None] | None, depth: int) -> None:
        self._factory = ranker
        self._ranker: Retriever | None = None
        self.depth = depth
        self._positions: dict[str, dict[str, int]] = {}

    def _retriever(self) -> Retriever | None:
        if self._factory is not None:
            self._ranker, self._factory = self._factory(), None
        return self._ranker

    def add(self, queries: Sequence[str], ranked: Sequence[Sequence[Hit]]) -> None:
        """Rankings a caller already has (a2x's pre-ranking and rescue retrieve before the descent)."""
        for query, hits in zip(queries, ranked, strict=True):
            self._positions.setdefault(query, {hit.service_id: k for k, hit in enumerate(hits)})

    def prepare(self, queries: Iterable[str]) -> None:
        """Fetch the rankings of the ``queries`` that have none yet, in one retrieval call."""
        todo = [query for query in dict.fromkeys(queries) if query not in self._positions]
        retriever = self._retriever() if todo else None
        if retriever is not None:
            self.add(todo, retriever.retrieve(todo, self.depth))

    def order(self, query: str, offered: Sequence[Collection[str]]) -> list[int]:
        """Indexes of ``offered`` (each a set of services) in the query's order: the best-ranked service first
        when the query has a ranking, then the most services, then the order given."""
        positions = self._positions.get(query)
        unranked = len(positions) if positions is not None else 0

        def key(k: int) -> tuple[int, int, int]:
            best = min((positions.get(s, unranked) for s in offered[k]), default=unranked) if positions else 0
            return best, -len(offered[k]), k

        return sorted(range(len(offered)), key=key)


def overselected(config: LlmSearchConfig, chosen: int, offered: int) -> bool:
    """Whether an answer choosing ``chosen`` of ``offered`` options chose too many to be taken as it is."""
    return chosen > config.overselect_keep and chosen > config.overselect_share * offered


class QueryBudget:
    """The budget of each query of a batch, read from its ledger (what it has spent so far)."""

    def __init__(self, config: LlmSearchConfig, engine: Engine, ledgers: Sequence[SearchCost]) -> None:
        self.calls = config.max_calls_per_query
        self.tokens = config.max_prompt_tokens_per_query
        self.engine = engine
        self.ledgers = ledgers

    @property
    def limited(self) -> bool:
        return bool(self.calls or self.tokens)

    def fits(self, owner: int, requests: Sequence[Request], *, descent: bool) -> int:
        """How many of ``requests``, taken in order, query ``owner`` may still send (all of them without a budget).
        Prompt tokens are counted exactly only where a cheap upper bound says they might not fit."""
        if not self.limited:
            return len(requests)
        share = DESCENT_SHARE if descent else 1.0
        # A share of a budget that is set is at least one call (one token): 0 would read as "no limit".
        calls_cap = max(1, int(self.calls * share)) if self.calls else 0
        tokens_cap = max(1, int(self.tokens * share)) if self.tokens else 0
        ledger = self.ledgers[owner]
        calls, tokens = ledger.calls, ledger.prompt_tokens
        # Requests admitted on their upper bound alone, whose exact count is taken only if a later one needs it.
        bounded: list[Request] = []
        bound = 0
        for n, request in enumerate(requests):
            if calls_cap and calls + 1 > calls_cap:
                return n
            if tokens_cap:
                cheap = prompt_tokens_bound(request.messages)
                if tokens + bound + cheap <= tokens_cap:
                    bounded.append(request)
                    bound += cheap
                else:
                    tokens += sum(self.engine.count_prompt_tokens(r.messages) for r in bounded)
                    bounded, bound = [], 0
                    need = self.engine.count_prompt_tokens(request.messages)
                    if tokens + need > tokens_cap:
                        return n
                    tokens += need
            calls += 1
        return len(requests)


def keep(budget: QueryBudget, ranking: Ranking | None, items: Mapping[int, list[tuple[Request, Collection[str]]]], *,
         descent: bool) -> dict[int, list[int]]:
    """Per query (owner -> its requests in the order made, each with the services it offers), the indexes of the
    requests it may send, in the order made: all of them when they fit its budget, else those first in the
    query's order (the query's ranking fetched for all such queries at once). What is left out is counted."""
    kept = {owner: list(range(len(entries))) for owner, entries in items.items()}
    over = [owner for owner, entries in items.items()
            if budget.fits(owner, [request for request, _ in entries], descent=descent) < len(entries)]
    if not over:
        return kept
    if ranking is not None:
        ranking.prepare(items[owner][0][0].context["query"] for owner in over)
    for owner in over:
        entries = items[owner]
        query = entries[0][0].context["query"]
        order = (ranking or Ranking(None, 0)).order(query, [services for _, services in entries])
        allowed = budget.fits(owner, [entries[k][0] for k in order], descent=descent)
        kept[owner] = sorted(order[:allowed])
        budget.ledgers[owner].budget_cut += len(entries) - allowed
    return kept
