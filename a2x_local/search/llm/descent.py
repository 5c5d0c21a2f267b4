"""Recursive descent over the category tree, level by level, for many queries at once.

At each level every node being expanded, for every query in flight, becomes one request, and all of them go to
the engine in one call: a batch of queries costs as many sequential rounds as the deepest walk, not the sum.
The model sees the children as a numbered list and answers positions or NONE; each selected child is expanded,
NONE prunes only that node's subtree, and when nothing is chosen at the root the largest child is expanded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from a2x_local.errors import UserError
from a2x_local.llm import Engine, Request
from a2x_local.search.llm.config import LlmSearchConfig
from a2x_local.search.llm.listing import category_line, clip, numbered
from a2x_local.search.llm.positions import parse_positions, positions_budget, positions_constraint
from a2x_local.search.llm.prompting import render
from a2x_local.search.llm.rounds import RoundRunner, prompt_room
from a2x_local.taxonomy import Tree

DESCEND_LABEL = "descend"


@dataclass
class NodeDecision:
    """What the model decided at one node for one query."""

    node: str
    selected: list[str]
    pruned: list[str]
    answer: str | None = None
    fallback: bool = False
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "selected": list(self.selected), "pruned": list(self.pruned),
                "answer": self.answer, "fallback": self.fallback, "error": self.error}


@dataclass
class Walk:
    """One query's descent: nodes visited (level by level, children in stored order) and decisions taken."""

    query: str
    mode: str
    visited: list[str] = field(default_factory=list)
    decisions: list[NodeDecision] = field(default_factory=list)

    def reached(self, tree: Tree) -> list[tuple[str, list[str]]]:
        """(node, direct services) of every visited node that has any: internal nodes' own services included."""
        return [(node, tree.node(node).services) for node in self.visited if tree.node(node).services]


class Descender:
    """Builds descent requests for one tree and walks many queries down it together."""

    def __init__(self, tree: Tree, engine: Engine, config: LlmSearchConfig) -> None:
        self.tree = tree
        self.engine = engine
        self.config = config
        self._listings: dict[tuple[str, bool], tuple[str, str]] = {}

    def _listing(self, node_id: str, boundary: bool) -> tuple[str, str]:
        """(path, numbered children) of a node; the same text for every query, so computed once."""
        key = (node_id, boundary)
        if key not in self._listings:
            names = [self.tree.node(n).name for n in self.tree.path(node_id)[1:]]
            path = " > ".join(clip(name, self.config.name_chars) for name in names) or "top level"
            lines = [category_line(child, self.config, boundary=boundary) for child in self.tree.children(node_id)]
            self._listings[key] = (path, numbered(lines))
        return self._listings[key]

    def request(self, query: str, mode: str, node_id: str) -> Request:
        children = self.tree.node(node_id).children
        path, listing = self._listing(node_id, boundary=mode == "get_one")
        messages = render("descend", mode, path=path, children=listing, query=query)
        limit = self.config.max_children_selected
        budget = positions_budget(len(children), limit, self.config.answer_margin_tokens)
        room = prompt_room(self.engine, messages, budget)
        if room is not None and room < 0:
            without_query = prompt_room(self.engine, render("descend", mode, path=path, children=listing, query=""),
                                        budget)
            if without_query is not None and without_query >= 0:
                raise UserError(f"the query is too long for the model's context window"
                                f" ({self.engine.max_model_len:,} tokens, with the categories of tree node"
                                f" '{node_id}'): it is {len(query):,} characters", code="QueryTooLong",
                                hint="shorten the query to what the agent needs, or use a model with a longer"
                                " context (engine max_model_len)")
            raise UserError(f"the {len(children)} sub-categories of tree node '{node_id}' do not fit the model's"
                            f" context window ({self.engine.max_model_len:,} tokens)",
                            hint="use a model with a longer context (engine max_model_len) or a tree with fewer,"
                            " shorter categories per node")
        return Request(messages=messages, constraint=positions_constraint(len(children), limit), max_tokens=budget,
                       label=DESCEND_LABEL, temperature=self.config.temperature, seed=self.config.seed,
                       context={"call": DESCEND_LABEL, "query": query, "mode": mode, "node": node_id,
                                "options": list(children), "max_items": limit})

    def largest_child(self, node_id: str) -> str:
        """The fallback: the child with most services (the first of equals)."""
        children = self.tree.node(node_id).children
        return max(children, key=lambda c: (self.tree.subtree_size(c), -children.index(c)))

    def descend(self, queries: Sequence[tuple[str, str]], runner: RoundRunner) -> list[Walk]:
        """Walk every (query, mode) down the tree; ``runner`` ledgers are indexed like ``queries``."""
        walks = [Walk(query, mode) for query, mode in queries]
        frontier: list[tuple[int, str]] = [(q, self.tree.root_id) for q in range(len(walks))]
        while frontier:
            owners, nodes, requests = [], [], []
            for q, node_id in frontier:
                walks[q].visited.append(node_id)
                if self.tree.node(node_id).children:
                    owners.append(q)
                    nodes.append(node_id)
                    requests.append(self.request(walks[q].query, walks[q].mode, node_id))
            results = runner.run(owners, requests)
            frontier = []
            for q, node_id, result in zip(owners, nodes, results, strict=True):
                children = self.tree.node(node_id).children
                chosen = parse_positions(result.value, len(children)) if result.ok else []
                selected = [c for i, c in enumerate(children) if i in chosen]
                decision = NodeDecision(node_id, selected, [c for c in children if c not in selected],
                                        answer=result.text if result.ok else None, error=result.error)
                if not selected and node_id == self.tree.root_id:
                    fallback = self.largest_child(node_id)
                    decision.selected, decision.fallback = [fallback], True
                    decision.pruned = [c for c in children if c != fallback]
                walks[q].decisions.append(decision)
                frontier.extend((q, child) for child in decision.selected)
        return walks
