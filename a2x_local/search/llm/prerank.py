"""In-group pre-ranking: a selection group lists its services best first by the hybrid retriever's score for the
query, and describes only the first few of them. The rest either wait for a second round that only queries which
chose nothing get (`prerank_rest = "round"`), or follow in the same list by name alone (`"names"`).

A reached group holds ~40 services of which a query needs one or two, and retrieval puts the needed one among its
first ten most of the time, so most queries are answered from a short list. The list's length adapts to the
group's (`prerank_min`, or `prerank_share` of a large group), and the retrieval runs once per batch of queries.
Held back, a service the retriever ranks low (a prerequisite such as "get the current user" for "create a
playlist") is never seen by a query that found another; by name it costs a few tokens and stays choosable.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from a2x_local.search.llm.config import LlmSearchConfig, prerank_shown
from a2x_local.search.llm.grouping import RESCUE_KEY, Group

if TYPE_CHECKING:
    from a2x_local.search.types import Hit


def rank_positions(ranked: Sequence[Hit]) -> dict[str, int]:
    """Service id -> its position in one query's retrieval ranking (0 = best)."""
    return {hit.service_id: position for position, hit in enumerate(ranked)}


def prerank(groups: Sequence[Group], positions: Mapping[str, int], config: LlmSearchConfig) -> list[Group]:
    """Each group best first, its first ``prerank_shown`` services described and the rest held back or named.

    Services the ranking does not reach follow the ranked ones in their group order. The rescue group is the
    retriever's own top-k already, so it is left whole.
    """
    ranked = []
    for group in groups:
        shown = prerank_shown(config, len(group.services))
        if group.key == RESCUE_KEY or shown >= len(group.services):
            ranked.append(group)
            continue
        unranked = len(positions)
        order = sorted(range(len(group.services)), key=lambda k: (positions.get(group.services[k], unranked), k))
        services = [group.services[k] for k in order]
        if config.prerank_rest == "names":
            ranked.append(Group(group.key, services, group.part, group.parts, brief=len(services) - shown))
        else:
            ranked.append(Group(group.key, services[:shown], group.part, group.parts, held=services[shown:]))
    return ranked
