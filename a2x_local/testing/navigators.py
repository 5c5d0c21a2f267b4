"""Simulated navigators: answer rules for a `ScriptedEngine` that play a model making the search's decisions.

A benchmark and test tool, never a product default: it knows each query's correct services, which no model does.
At error rate 0 it is an oracle (every option that leads to a correct service, most of them first, and exactly
the correct services offered). At error rate E each decision, independently, drops every correct item with
probability E and adds one wrong item with probability E, so the effect of search modes, answer caps, multi-label
placement and rescue on imperfect decisions can be measured without a model. Every draw is seeded, so results do
not depend on batching or order. Whether a correct item is dropped depends on the seed, the query, the call type,
the node (descent) and the item, not on the rest of the list: two search settings that offer the same item at
the same decision see the same draw, so their difference in hit is their structure's, not the random stream's
(a shorter or reordered selection list does not reshuffle the errors). Whether a wrong item is added, and which,
depends on the whole decision (node or group, and the options offered).

The reader navigator is the opposite kind of stand-in: it knows no answer and reads the lines the prompt offers,
so it shows what shortening those lines costs (the others never read them).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Mapping, Set

import numpy as np

from a2x_local.llm import Request
from a2x_local.search import NONE, option_services
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
        options = context["options"]
        decision = f"{self.seed}|{context['query']}|{context['call']}|{context.get('node', '')}"
        kept = [k for k in correct if random.Random(f"{decision}|{options[k]}").random() >= self.error_rate]
        self.dropped += len(correct) - len(kept)
        rng = random.Random(f"{decision}|{context.get('group', '')}|{','.join(options)}")
        if wrong and rng.random() < self.error_rate:
            kept.append(rng.choice(wrong))
            self.added += 1
        return kept


# A numbered list line of a prompt: "12. name: description".
_LISTED = re.compile(r"^(\d+)\. (.*)$")


def listed_lines(text: str, count: int) -> list[str]:
    """The texts of the first run of lines numbered 1..count in a prompt (what the model is offered)."""
    lines: list[str] = []
    for line in text.splitlines():
        match = _LISTED.match(line)
        if match and int(match.group(1)) == len(lines) + 1:
            lines.append(match.group(2))
            if len(lines) == count:
                return lines
        elif lines:
            lines = []
    raise ValueError(f"the prompt does not list {count} numbered options")


class ReaderNavigator:
    """A text-sensitive proxy: answers every decision by reading the offered lines, choosing those most similar to
    the request by an embedding model (``encode``: texts -> unit vectors, one row each).

    A benchmark tool. It knows nothing of the correct services, so it measures what the shown text tells a reader:
    shorter lines that lose the words a request matches lower its hit, which the oracle and the noisy navigator
    (they never read) cannot show. An embedding model is not a language model, so compare settings with it, not
    its hit with a model's. It takes the most similar option, and those within ``margin`` of it (at most ``most``)
    where the answer may hold several.

    With a ``floor``, a selection answers NONE when no service is at least that similar to the request, and takes
    only services above it, as a model answers NONE for a list that holds nothing it needs. Without one it always
    takes a service from every list, so a layout that splits the same candidates into more lists makes it return
    more services and hit more often without reading anything better: compare layouts with a floor.
    """

    def __init__(self, encode: Callable[[list[str]], np.ndarray], *, margin: float = 0.05, most: int = 3,
                 floor: float | None = None) -> None:
        self.encode = encode
        self.margin = margin
        self.most = most
        self.floor = floor
        self._vectors: dict[str, np.ndarray] = {}

    def vectors(self, texts: list[str]) -> np.ndarray:
        todo = [t for t in dict.fromkeys(texts) if t not in self._vectors]
        if todo:
            self._vectors.update(zip(todo, self.encode(todo), strict=True))
        return np.stack([self._vectors[t] for t in texts])

    def __call__(self, request: Request) -> str:
        context = request.context
        lines = listed_lines(request.messages[-1]["content"], len(context["options"]))
        vectors = self.vectors([context["query"], *lines])
        similarity = vectors[1:] @ vectors[0]
        order = sorted(range(len(lines)), key=lambda k: (-similarity[k], k))
        best = similarity[order[0]]
        most = min(self.most, context["max_items"])
        least = best - self.margin
        if self.floor is not None and context["call"] != "descend":
            least = max(least, self.floor)
        chosen = [k for k in order[:most] if similarity[k] >= least]
        return ",".join(str(k + 1) for k in chosen) or NONE
