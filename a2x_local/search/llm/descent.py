"""Recursive descent over the category tree, level by level, for many queries at once.

At each level every node being expanded, for every query in flight, becomes one request, and all of them go to
the engine in one call: a batch of queries costs as many sequential rounds as the deepest walk, not the sum.
The model sees the children as a numbered list and answers positions or NONE (one position in get_one); each
selected child is expanded, NONE prunes only that node's subtree, and when nothing is chosen at the root the
largest child is expanded. A node's own services (filed under none or several of its categories) are offered as
one more option, "other services here", where `other_services_child` says so, so a query can prune them too.
A reached node with at most `direct_select_below` services in its subtree is not descended: its whole subtree goes
to selection, which costs fewer tokens than another descent round when the branch is small.
An answer that chooses too much of a node, and a query whose budget is spent, are held in check (budget.py); with
`option_order = "shuffled"` each query sees a node's options in its own order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from a2x_local.errors import UserError
from a2x_local.llm import Engine, Request, Result, clip
from a2x_local.search.llm.budget import QueryBudget, Ranking, keep, overselected
from a2x_local.search.llm.config import LlmSearchConfig, answer_cap, answer_limit
from a2x_local.search.llm.language_hint import LanguageHint
from a2x_local.search.llm.listing import category_line, confusable, numbered, shared_opening, shown_order
from a2x_local.search.llm.positions import parse_positions, positions_budget, positions_constraint
from a2x_local.search.llm.prompting import other_services_line, render
from a2x_local.search.llm.rounds import RoundRunner, note_choice
from a2x_local.search.types import SearchCost
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
    """What the model decided at one node for one query. ``shown``: the options in the order the model saw them;
    ``overselected``: options it chose that were not expanded, its answer having chosen too many (budget.py)."""

    node: str
    selected: list[str]
    pruned: list[str]
    answer: str | None = None
    fallback: bool = False
    error: str | None = None
    capped: bool = False
    shown: list[str] = field(default_factory=list)
    overselected: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "selected": list(self.selected), "pruned": list(self.pruned),
                "answer": self.answer, "fallback": self.fallback, "error": self.error, "capped": self.capped,
                "shown": list(self.shown), "overselected": list(self.overselected)}


@dataclass
class Walk:
    """One query's descent: nodes visited (level by level, children in stored order) and decisions taken.

    ``own_pruned`` holds the nodes whose "other services here" option was offered and not chosen; ``direct`` the
    nodes selected from directly (their whole subtree, not descended); ``cut`` the nodes reached but neither
    visited nor searched because the query's budget was spent.
    """

    query: str
    mode: str
    visited: list[str] = field(default_factory=list)
    decisions: list[NodeDecision] = field(default_factory=list)
    own_pruned: set[str] = field(default_factory=set)
    direct: list[str] = field(default_factory=list)
    cut: list[str] = field(default_factory=list)

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
        self._listings: dict[tuple[str, bool], tuple[str, list[str], str]] = {}

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

    def _listing(self, node_id: str, boundary: bool) -> tuple[str, list[str], str]:
        """(path, option lines, the lines numbered) of a node; the same text for every query, so computed once."""
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
            self._listings[key] = (path, lines, numbered(lines))
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
        path, lines, listing = self._listing(node_id, boundary=mode == "get_one")
        order = shown_order(self.config, query, node_id, len(options))
        if order is not None:
            options, listing = [options[k] for k in order], numbered([lines[k] for k in order])
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

    def descend(self, queries: Sequence[tuple[str, str]], runner: RoundRunner,
                ranking: Ranking | None = None) -> list[Walk]:
        """Walk every (query, mode) down the tree; ``runner`` ledgers are indexed like ``queries``. ``ranking``
        (the queries' retrieval rankings, fetched when needed) orders what a budget or an over-selection keeps;
        without one the larger branches are kept."""
        walks = [Walk(query, mode) for query, mode in queries]
        budget = QueryBudget(self.config, self.engine, runner.ledgers)
        frontier: list[tuple[int, str]] = [(q, self.tree.root_id) for q in range(len(walks))]
        while frontier:
            wanted: dict[int, list[tuple[Request, frozenset[str]]]] = {}
            made: dict[tuple[int, str], Request] = {}
            for q, node_id in frontier:
                if not self.selects_directly(node_id) and self.tree.node(node_id).children:
                    request = made[(q, node_id)] = self.request(walks[q].query, walks[q].mode, node_id)
                    wanted.setdefault(q, []).append((request, self.tree.subtree_services(node_id)))
            allowed = keep(budget, ranking, wanted, descent=True)
            admitted = {(q, wanted[q][k][0].context["node"]) for q in wanted for k in allowed[q]}
            owners, nodes, requests = [], [], []
            for q, node_id in frontier:
                if (q, node_id) in made and (q, node_id) not in admitted:
                    walks[q].cut.append(node_id)
                    continue
                walks[q].visited.append(node_id)
                if (q, node_id) in made:
                    owners.append(q)
                    nodes.append(node_id)
                    requests.append(made[(q, node_id)])
                elif self.selects_directly(node_id):
                    walks[q].direct.append(node_id)
            results = runner.run(owners, requests)
            decisions = [self._decide(node_id, request, result, runner.ledgers[q])
                         for q, node_id, request, result in zip(owners, nodes, requests, results, strict=True)]
            self._keep_chosen(owners, decisions, walks, runner.ledgers, ranking)
            frontier = []
            for q, node_id, decision in zip(owners, nodes, decisions, strict=True):
                if decision.capped:
                    runner.ledgers[q].capped += 1
                walks[q].decisions.append(decision)
                if other_option(node_id) in decision.pruned:
                    walks[q].own_pruned.add(node_id)
                frontier.extend((q, option) for option in decision.selected if not is_other(option))
        return walks

    def _decide(self, node_id: str, request: Request, result: Result, ledger: SearchCost) -> NodeDecision:
        """The decision from an answer; an answer that filled a cap below the options offered is marked capped,
        one that chose too many is marked for `_keep_chosen` (its choices in ``overselected`` for now)."""
        options = request.context["options"]
        limit = request.context["max_items"]
        chosen = parse_positions(result.value, len(options)) if result.ok else []
        note_choice(ledger, len(options), chosen)
        selected = [option for i, option in enumerate(options) if i in chosen]
        cap = answer_cap(request.context["mode"], limit, len(options))
        decision = NodeDecision(node_id, selected, [o for o in options if o not in selected],
                                answer=result.text if result.ok else None, error=result.error,
                                capped=cap is not None and len(chosen) >= cap, shown=list(options))
        if overselected(self.config, len(selected), len(options)):
            decision.overselected = list(selected)
        if not selected and node_id == self.tree.root_id:
            fallback = self.largest_child(node_id)
            decision.selected, decision.fallback = [fallback], True
            decision.pruned = [o for o in options if o != fallback]
        return decision

    def _keep_chosen(self, owners: Sequence[int], decisions: Sequence[NodeDecision], walks: Sequence[Walk],
                     ledgers: Sequence[SearchCost], ranking: Ranking | None) -> None:
        """Answers that chose too many options keep `overselect_keep` of them, first in the query's order (the
        rankings of every such query fetched in one call); the rest are pruned and listed as over-selected."""
        over = [i for i, decision in enumerate(decisions) if decision.overselected]
        if not over:
            return
        if ranking is not None:
            ranking.prepare(walks[owners[i]].query for i in over)
        order = ranking or Ranking(None, 0)
        for i in over:
            decision = decisions[i]
            chosen = decision.overselected
            ranked = order.order(walks[owners[i]].query, [option_services(self.tree, o) for o in chosen])
            kept = {chosen[k] for k in ranked[: self.config.overselect_keep]}
            decision.selected = [o for o in chosen if o in kept]
            decision.overselected = [o for o in chosen if o not in kept]
            decision.pruned = [o for o in decision.shown if o not in kept]
            ledgers[owners[i]].overselected += 1
