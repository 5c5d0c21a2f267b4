"""Engine rounds shared by many queries, and what each query's share of them cost.

Every round sends the requests of all queries in flight in ONE ``engine.generate`` call; each request is tagged
with the query it serves, so tokens and calls can be summed per query (and add up to the engine's own totals).
"""

from __future__ import annotations

from collections.abc import Sequence

from a2x_local.llm import Engine, Request, Result
from a2x_local.search.types import SearchCost


class RoundRunner:
    """Runs engine rounds for a batch of queries and keeps one ledger per query: its share of the rounds (calls
    count attempts, retries included, as the engine's usage does)."""

    def __init__(self, engine: Engine, queries: int) -> None:
        self.engine = engine
        self.ledgers = [SearchCost() for _ in range(queries)]

    def run(self, owners: Sequence[int], requests: Sequence[Request]) -> list[Result]:
        """One engine call for all ``requests``; ``owners[i]`` is the query that ``requests[i]`` serves."""
        if len(owners) != len(requests):
            raise ValueError("one owner per request")
        if not requests:
            return []
        results = self.engine.generate(list(requests))
        # A retried answer took a second sequential round for that query.
        depth: dict[int, int] = {}
        for owner, result in zip(owners, results, strict=True):
            ledger = self.ledgers[owner]
            ledger.prompt_tokens += result.prompt_tokens
            ledger.completion_tokens += result.completion_tokens
            ledger.calls += result.attempts
            ledger.truncated += result.truncated
            depth[owner] = max(depth.get(owner, 0), result.attempts)
        for owner, rounds in depth.items():
            self.ledgers[owner].rounds += rounds
        return results


# Positions whose choices are counted one by one (a list longer than this is still counted for the first option).
POSITIONS_TRACKED = 30


def note_choice(ledger: SearchCost, offered: int, chosen: Sequence[int]) -> None:
    """Count one valid answer for the position-bias measure: a choice among two or more options (``chosen``:
    0-based positions as shown), whether it took the first, and how likely a choice of as many options made
    blind to position would have taken it (len(chosen) / offered)."""
    if offered < 2 or not chosen:
        return
    ledger.choices += 1
    ledger.first_choices += int(0 in chosen)
    blind = min(len(chosen), offered) / offered
    ledger.uniform_first += blind
    for position in range(min(offered, POSITIONS_TRACKED)):
        key = str(position + 1)
        ledger.position_blind[key] = ledger.position_blind.get(key, 0.0) + blind
        if position in chosen:
            ledger.position_choices[key] = ledger.position_choices.get(key, 0) + 1
