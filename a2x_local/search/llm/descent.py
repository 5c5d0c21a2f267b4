"""Recursive descent over the category tree, level by level, for many queries at once.

At each level every node being expanded, for every query in flight, becomes one request, and all of them go to
the engine in one call: a batch of queries costs as many sequential rounds as the deepest walk, not the sum.
The model sees the children as a numbered list and answers positions or NONE (one position in get_one); each
selected child is expanded, NONE prunes only that node's subtree, and when nothing is chosen at the root the
largest child is expanded. A node's own services (filed under none or several of its categories) are offered as
one more option, "other services here", where `other_services_child` says so, so a query can prune them too.
A reached node with at most `direct_select_below` services in its subtree is not descended: its whole subtree goes
to selection, which costs fewer tokens than another descent round when the branch is small.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from a2x_local.errors import UserError
from a2x_local.llm import Engine, Request, Result, clip
from a2x_local.search.llm.config import LlmSearchConfig, answer_cap, answer_limit
from a2x_local.search.llm.language_hint import LanguageHint
from a2x_local.search.llm.listing import category_line, confusable, numbered, shared_opening
from a2x_local.search.llm.positions import parse_positions, positions_budget, positions_constraint
from a2x_local.search.llm.prompting import other_services_line, render
from a2x_local.search.llm.rounds import RoundRunner
from a2x_local.taxonomy import Tree

DESCEND_LABEL = "descend"
# The option id of a node's own services: the node's id plus this suffix (never a real node id, which has none).
OTHER_SUFFIX = "#other"


def other_option(node_id: str) -> str:
    return node_id + OTHER_SUFFIX


def is_other(option: str) -> bool:
    return option.endswith(OTHER_SUFFIX)


def other_owner(option: str) -> str:
    """The node whose own services an `other_option` stands for."""
    return option[: -len(OTHER_SUFFIX)]


def option_services(tree: Tree, option: str) -> frozenset[str]:
    """The services an offered option leads to: a child's whole subtree, or a node's own services."""
    if is_other(option):
        return frozenset(tree.node(other_owner(option)).services)
    return tree.subtree_services(option)


@dataclass
class NodeDecision:
    """What the model decided at one node for one query."""

    node: str
    selected: list[str]
    pruned: list[str]
    answer: str | None = None
    fallback: bool = False
    error: str | None = None
    capped: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "selected": list(self.selected), "pruned": list(self.pruned),
                "answer": self.answer, "fallback": self.fallback, "error": self.error, "capped": self.capped}


@dataclass
class Walk:
    """One query's descent: nodes visited (level by level, children in stored order) and decisions taken.

    ``own_pruned`` holds the nodes whose "other services here" option was offered and not chosen; ``direct`` the
    nodes selected from directly (their whole subtree, not descended).
    """

    query: str
    mode: str
    visited: list[str] = field(default_factory=list)
    decisions: list[NodeDecision] = field(default_factory=list)
    own_pruned: set[str] = field(default_factory=set)
    direct: list[str] = field(default_factory=list)

    def reached(self, tree: Tree) -> list[tuple[str, list[str]]]:
        """(node, services) of every visited node with any: its direct services unless they were pruned, or for a
        node selected from directly every service of its subtree (tree order)."""
        reached = []
        for node in self.visited:
            services = subtree_in_order(tree, node) if node in self.direct else tree.node(node).services
            if services and node not in self.own_pruned:
                reached.append((node, services))
        return reached


def subtree_in_order(tree: Tree, node_id: str) -> list[str]:
    """Every service under a node once, in tree pre-order (a node's own services before its children's)."""
    return list(dict.fromkeys(s for node in tree.walk(node_id) for s in node.services))


class Descender:
    """Builds descent requests for one tree and walks many queries down it together."""

    def __init__(self, tree: Tree, engine: Engine, config: LlmSearchConfig, *,
                 service_names: Mapping[str, str] | None = None, language: LanguageHint | None = None) -> None:
        self.tree = tree
        self.language = language
        self.engine = engine
        self.config = config
        self.service_names = service_names or {}
        self._listings: dict[tuple[str, bool], tuple[str, str]] = {}

    def offers_other(self, node_id: str) -> bool:
        """Whether a node's own services are an option of its own (they need children to sit beside)."""
        node = self.tree.node(node_id)
        where = self.config.other_services_child
        if not (node.children and node.services) or where == "none":
            return False
        return where == "all" or node_id == self.tree.root_id

    def options(self, node_id: str) -> list[str]:
        """What the model chooses among at a node: its children, then its own services when offered."""
        children = list(self.tree.node(node_id).children)
        return [*children, other_option(node_id)] if self.offers_other(node_id) else children

    def _listing(self, node_id: str, boundary: bool) -> tuple[str, str]:
        """(path, numbered options) of a node; the same text for every query, so computed once."""
        key = (node_id, boundary)
        if key not in self._listings:
            names = [self.tree.node(n).name for n in self.tree.path(node_id)[1:]]
            path = " > ".join(clip(name, self.config.name_chars) for name in names) or "top level"
            children = self.tree.children(node_id)
            marked = confusable({c.id: self.tree.subtree_services(c.id) for c in children},
                                self.config.boundary_min_overlap) if boundary else set()
            compact = self.config.category_lines == "compact"
            opening = shared_opening([c.description for c in children]) if compact else ""
            lines = [category_line(child, self.config, boundary=child.id in marked, opening=opening)
                     for child in children]
            if self.offers_other(node_id):
                own = self.tree.node(node_id).services
                lines.append(other_services_line(len(own), self._names(own)))
            self._listings[key] = (path, numbered(lines))
        return self._listings[key]

    def _names(self, services: Sequence[str]) -> list[str]:
        """Example names for the other-services line: the first few ids' names when known (as service lines show
        them: cut, and defused as data), else the ids."""
        return [self.service_names.get(s) or clip(s, self.config.name_chars)
                for s in services[: self.config.other_services_examples]]

    def request(self, query: str, mode: str, node_id: str) -> Request:
        options = self.options(node_id)
        limit = answer_limit(mode, self.config.max_children_selected, len(options))
        cap = answer_cap(mode, limit, len(options))
        path, listing = self._listing(node_id, boundary=mode == "get_one")
        across = self.language.needed(query) if self.language is not None else True
        messages = render("descend", mode, cap=cap, layout=self.config.prompt_layout, across_languages=across,
                          path=path, children=listing, query=query)
        budget = positions_budget(len(options), limit, self.config.answer_margin_tokens)
        room = self.engine.prompt_room(messages, budget)
        if room is not None and room < 0:
            without_query = self.engine.prompt_room(render("descend", mode, cap=cap, across_languages=across,
                                                           path=path, children=listing, query=""), budget)
            if without_query is not None and without_query >= 0:
                raise UserError(f"the query is too long for the model's context window"
                                f" ({self.engine.max_model_len:,} tokens, with the categories of tree node"
                                f" '{node_id}'): it is {len(query):,} characters", code="QueryTooLong",
                                hint="shorten the query to what the agent needs, or use a model with a longer"
                                " context (engine max_model_len)")
            raise UserError(f"the {len(options)} options at tree node '{node_id}' do not fit the model's"
                            f" context window ({self.engine.max_model_len:,} tokens); nothing was sent",
                            hint="use a model with a longer context (engine max_model_len), shorter category lines"
                            " ([search] category_description_chars) or a tree with fewer categories per node")
        return Request(messages=messages, constraint=positions_constraint(len(options), limit), max_tokens=budget,
                       label=DESCEND_LABEL, temperature=self.config.temperature, seed=self.config.seed,
                       context={"call": DESCEND_LABEL, "query": query, "mode": mode, "node": node_id,
                                "options": options, "max_items": limit})

    def selects_directly(self, node_id: str) -> bool:
        """Whether a reached node goes straight to selection: an internal node with a small enough subtree."""
        limit = self.config.direct_select_below
        return bool(limit and self.tree.node(node_id).children and self.tree.subtree_size(node_id) <= limit)

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
                if self.selects_directly(node_id):
                    walks[q].direct.append(node_id)
                elif self.tree.node(node_id).children:
                    owners.append(q)
                    nodes.append(node_id)
                    requests.append(self.request(walks[q].query, walks[q].mode, node_id))
            results = runner.run(owners, requests)
            frontier = []
            for q, node_id, request, result in zip(owners, nodes, requests, results, strict=True):
                decision = self._decide(node_id, request, result)
                if decision.capped:
                    runner.ledgers[q].capped += 1
                walks[q].decisions.append(decision)
                if other_option(node_id) in decision.pruned:
                    walks[q].own_pruned.add(node_id)
                frontier.extend((q, option) for option in decision.selected if not is_other(option))
        return walks

    def _decide(self, node_id: str, request: Request, result: Result) -> NodeDecision:
        """The decision from an answer; an answer that filled a cap below the options offered is marked capped."""
        options = request.context["options"]
        limit = request.context["max_items"]
        chosen = parse_positions(result.value, len(options)) if result.ok else []
        selected = [option for i, option in enumerate(options) if i in chosen]
        cap = answer_cap(request.context["mode"], limit, len(options))
        decision = NodeDecision(node_id, selected, [o for o in options if o not in selected],
                                answer=result.text if result.ok else None, error=result.error,
                                capped=cap is not None and len(chosen) >= cap)
        if not selected and node_id == self.tree.root_id:
            fallback = self.largest_child(node_id)
            decision.selected, decision.fallback = [fallback], True
            decision.pruned = [o for o in options if o != fallback]
        return decision
