"""The uniformly random navigator: the floor a model that decides must stand above.

A benchmark and test tool: at every descent and selection decision it picks options uniformly at random, as many as
``picks`` (one in get_one; in the other modes at most the decision's own cap). It reads nothing, so a model whose hit
is no better than this one's is not navigating by meaning. Every draw is seeded by the seed, the query and the
decision's options, so a run does not depend on batching or order, and several seeds give its expected hit.
"""

from __future__ import annotations

import random

from a2x_local.llm import Request


class RandomNavigator:
    """``ScriptedEngine(RandomNavigator(seed=0))`` answers every descent and selection request at random."""

    def __init__(self, *, seed: int = 0, picks: int = 1) -> None:
        if picks < 1:
            raise ValueError("a random navigator picks at least one option")
        self.seed = seed
        self.picks = picks

    def __call__(self, request: Request) -> str:
        context = request.context
        options = list(context["options"])
        count = min(self.picks, int(context.get("max_items") or self.picks), len(options))
        rng = random.Random(f"{self.seed}|{context['query']}|{context['call']}|{'|'.join(options)}")
        chosen = sorted(rng.sample(range(len(options)), count))
        return ",".join(str(k + 1) for k in chosen)
