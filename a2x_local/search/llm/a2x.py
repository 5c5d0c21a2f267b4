"""The A2X method: recursive descent over the active tree, then service selection over what it reached.

With a rescue retriever (the `a2x+rescue` method) the hybrid top-k joins as one more candidate group before
selection, to recover services filed under a category the descent did not enter. With a ranker and pre-ranking on
(`prerank_min`), each group shows its best services first and holds the rest back (prerank.py). One retrieval
call per batch serves both, made before the descent, so the same rankings order what a query's budget or an
answer that chose too much keeps (budget.py); without either, a ``fallback_ranker`` is asked only for the queries
that need it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from a2x_local.llm import Engine
from a2x_local.registry import Service
from a2x_local.search.llm.answers import checked_modes, failure, make_answer
from a2x_local.search.llm.budget import Ranking
from a2x_local.search.llm.config import LlmSearchConfig
from a2x_local.search.llm.descent import Descender, Walk, is_other, other_owner
from a2x_local.search.llm.grouping import RESCUE_KEY, TreeIndex, extra_group, pack, path_group, tree_groups
from a2x_local.search.llm.language_hint import LanguageHint, catalogue_texts
from a2x_local.search.llm.listing import name_lines, service_lines
from a2x_local.search.llm.prerank import prerank, rank_positions
from a2x_local.search.llm.prompting import prompt_hash
from a2x_local.search.llm.rounds import RoundRunner
from a2x_local.search.llm.selection import Selection, SelectionJob, Selector
from a2x_local.search.llm.staleness import Staleness
from a2x_local.search.types import Hit, SearchAnswer, SearchMethod, SearchRequest
from a2x_local.taxonomy import Tree

if TYPE_CHECKING:
    from a2x_local.search.types import Retriever


class A2XSearch(SearchMethod):
    """Searches one tree with one engine; safe to share between callers (requests carry their own mode)."""

    ranked = False

    def __init__(self, tree: Tree, services: Mapping[str, Service], engine: Engine, config: LlmSearchConfig, *,
                 rescue: Retriever | None = None, ranker: Retriever | None = None, name: str | None = None,
                 stale: Staleness | None = None,
                 fallback_ranker: Callable[[], Retriever | None] | None = None) -> None:
        missing = sorted(tree.service_ids() - set(services))
        if missing:
            raise ValueError(f"the tree names {len(missing)} services the registry lacks, e.g. {missing[0]!r}")
        self.tree = tree
        self.engine = engine
        self.config = config
        self.rescue = rescue
        # Pre-ranking needs both the setting and a ranker; without one (a tree compared by the nightly gate) the
        # groups are shown whole, and describe() says so.
        self.ranker = ranker if config.prerank_min else None
        # What orders a budget's or an over-selection's choice when neither pre-ranking nor the rescue retrieves
        # (a function makes it on first need: the indexes load only for a model that decides badly).
        given = self.ranker or rescue
        self.fallback_ranker = (lambda: given) if given is not None else fallback_ranker
        self.stale = stale
        # A pre-ranked list describes a few services and names the rest, so it may hold more of them.
        named = self.ranker is not None and config.prerank_rest == "names"
        self.group_cap = config.named_group_cap if named else config.group_cap
        self.name = name or ("a2x+rescue" if rescue is not None else "a2x")
        self.index = TreeIndex(tree)
        self.lines = service_lines(services.values(), config)
        categories = [text for node in tree.walk() if node.id != tree.root_id for text in (node.name, node.description)]
        self.language = LanguageHint([*categories, *catalogue_texts(services.values())], config.language_line)
        names = name_lines(services.values(), config)
        self.descender = Descender(tree, engine, config, language=self.language, service_names=names)
        self.selector = Selector(self.lines, engine, config, names=names, language=self.language, ordered=True)

    def search(self, query: str, mode: str | None = None) -> SearchAnswer:
        return self.search_batch([SearchRequest(query, mode=mode)])[0]

    def search_batch(self, requests: Sequence[SearchRequest]) -> list[SearchAnswer]:
        """All requests together: one engine call per tree level, then one for every selection group."""
        if not requests:
            return []
        started = time.perf_counter()
        modes = checked_modes(requests, self.config.default_mode, self.name)
        queries = [request.query for request in requests]
        runner = RoundRunner(self.engine, len(requests))
        rescued, ranked = self._retrieve(queries)
        ranking = Ranking(self.fallback_ranker, self.config.prerank_depth)
        if ranked is not None:
            ranking.add(queries, ranked)
        walks = self.descender.descend(list(zip(queries, modes, strict=True)), runner, ranking)
        jobs, origins = [], []
        for q, walk in enumerate(walks):
            extra = [hit.service_id for hit in rescued[q]] if rescued is not None else []
            if walk.mode == "get_one":
                # One path, one list: the single best service is chosen among all of it in one answer.
                groups, origin = path_group(walk.reached(self.tree), self.index, extra, self.group_cap)
            else:
                groups, origin = tree_groups(walk.reached(self.tree), self.index,
                                             threshold=self.config.merge_threshold, cap=self.group_cap,
                                             lists=self.config.group_lists)
                if self.config.pack_groups:
                    groups = pack(groups, self.group_cap)
                if rescued is not None:
                    groups += extra_group(RESCUE_KEY, extra, origin, self.group_cap)
            if ranked is not None:
                groups = prerank(groups, rank_positions(ranked[q]), self.config)
            jobs.append(SelectionJob(walk.query, walk.mode, groups))
            origins.append(origin)
        selections = self.selector.select(jobs, runner, budget=True, ranking=ranking)
        seconds = (time.perf_counter() - started) / len(requests)
        answers = []
        for q, request in enumerate(requests):
            origin = origins[q]
            hits = [Hit(service_id, path=list(self.index.paths[origin[service_id]]) if service_id in origin else [])
                    for service_id in selections[q].selected]
            answers.append(make_answer(request, hits, runner.ledgers[q], seconds,
                                       self._trace(walks[q], selections[q], runner.ledgers[q].rounds),
                                       failure(selections[q], walks[q].decisions)))
        return answers

    def _retrieve(self, queries: list[str]) -> tuple[list[list[Hit]] | None, list[list[Hit]] | None]:
        """The rescue's top-k and the pre-ranking's ranking per query (None when unused): one call when one
        retriever serves both, the rescue's top-k then being the ranking's head."""
        rescue_k, rank_k = self.config.rescue_top_k, self.config.prerank_depth
        if self.rescue is not None and self.rescue is self.ranker:
            ranked = self.rescue.retrieve(queries, max(rescue_k, rank_k))
            return [hits[:rescue_k] for hits in ranked], ranked
        rescued = self.rescue.retrieve(queries, rescue_k) if self.rescue is not None else None
        ranked = self.ranker.retrieve(queries, rank_k) if self.ranker is not None else None
        return rescued, ranked

    def _trace(self, walk: Walk, selection: Selection, rounds: int) -> dict[str, Any]:
        shown = set(walk.visited) | {c for d in walk.decisions for c in (*d.pruned, *d.selected) if not is_other(c)}
        # Tree order from the positions computed once, rather than a walk over every node of the tree per query.
        names = {node_id: self.tree.node(node_id).name for node_id in sorted(shown, key=self.index.order.__getitem__)}
        for decision in walk.decisions:
            for option in (*decision.selected, *decision.pruned):
                if is_other(option):
                    names[option] = f"other services of {self.tree.node(other_owner(option)).name}"
        return {"method": self.name, "mode": walk.mode, "tree": self.tree.build_id, "rounds": rounds,
                "visited": list(walk.visited), "direct": list(walk.direct),
                "decisions": [d.to_dict() for d in walk.decisions], "selection": selection.to_dict(), "names": names,
                **({"budget_cut": {"nodes": list(walk.cut), "lists": list(selection.cut)}}
                   if walk.cut or selection.cut else {}),
                **({"stale": self.stale.to_dict()} if self.stale is not None else {})}

    def describe(self) -> dict[str, Any]:
        stats = self.tree.stats()
        return {"method": self.name, "tree": self.tree.build_id, "tree_depth": stats.depth,
                "tree_leaves": stats.leaves, "engine": self.engine.describe(),
                "config": self.config.model_dump(), "prompts": prompt_hash()[:16], "rescue": self.rescue is not None,
                "prerank": self.ranker is not None, "language": self.language.describe(),
                "stale": self.stale.to_dict() if self.stale is not None else None}
