"""A simulated navigator: an answer rule for a `ScriptedEngine` that plays a model making the search's decisions.

A benchmark and test tool, never a product default: it knows each query's correct services, which no model does.
At error rate 0 it is an oracle (every option that leads to a correct service, most of them first, and exactly
the correct services offered). At error rate E each decision, independently, drops every correct item with
probability E and adds one wrong item with probability E, so the effect of search modes, answer caps, multi-label
placement and rescue on imperfect decisions can be measured without a model. Every draw is seeded by the seed, the
query and the decision (node or group, and the options offered), so results do not depend on batching or order.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Set

from a2x_local.llm import Request
from a2x_local.search.llm.descent import option_services
from a2x_local.search.llm.positions import NONE
from a2x_local.taxonomy import Tree


class SimulatedNavigator:
    """``ScriptedEngine(SimulatedNavigator(tree, correct, error_rate=0.1, seed=0))`` answers descent and
    selection requests; ``correct`` maps a query's text to its correct service ids."""

    def __init__(self, tree: Tree, correct: Mapping[str, Set[str]], *, error_rate: float = 0.0,
                 seed: int = 0) -> None:
        if not 0.0 <= error_rate <= 1.0:
            raise ValueError("the error rate is a probability, from 0 to 1")
        self.tree = tree
        self.correct = correct
        self.error_rate = error_rate
        self.seed = seed
        self.decisions = 0       # requests answered
        self.correct_seen = 0    # correct items offered in them
        self.dropped = 0
        self.added = 0

    def __call__(self, request: Request) -> str:
        context = request.context
        wanted = self.correct.get(context["query"], set())
        options = list(context["options"])
        if context["call"] == "descend":
            relevance = [len(option_services(self.tree, option) & wanted) for option in options]
        else:
            relevance = [int(option in wanted) for option in options]
        ranked = sorted((k for k, score in enumerate(relevance) if score), key=lambda k: (-relevance[k], k))
        chosen = self._perturb(ranked, [k for k, score in enumerate(relevance) if not score], context)
        return ",".join(str(k + 1) for k in chosen[: context["max_items"]]) or NONE

    def _perturb(self, correct: list[int], wrong: list[int], context: Mapping) -> list[int]:
        """The correct positions (most relevant first), each kept with probability 1 - E, then at most one wrong
        position added with probability E (last: a model asked for the most relevant first would put it there)."""
        self.decisions += 1
        self.correct_seen += len(correct)
        if not self.error_rate:
            return correct
        where = context.get("node", context.get("group", ""))
        rng = random.Random(f"{self.seed}|{context['query']}|{context['call']}|{where}|{','.join(context['options'])}")
        kept = [k for k in correct if rng.random() >= self.error_rate]
        self.dropped += len(correct) - len(kept)
        if wrong and rng.random() < self.error_rate:
            kept.append(rng.choice(wrong))
            self.added += 1
        return kept
