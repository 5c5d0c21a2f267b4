"""Service selection: one constrained call per candidate group, for every query in flight in one engine round.

get_all and get_important answer positions (or NONE) per group. get_one answers one position: A2X gives it one
list (its one path's services), so it needs no further round unless that list had to be split to fit a prompt;
then one more call chooses among the parts' picks. When nothing is picked, the groups are asked again in
get_important mode and the first service chosen is taken. Both follow-ups of all queries share one round.
Groups that pre-ranking cut short offer their held-back rest in one more round, to the queries whose answers
chose nothing; a get_one query that needed it takes its follow-ups one round later.
A2X's selection keeps to each query's budget (budget.py) and may show every list in an order of the query's own
(`option_order`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from a2x_local.errors import UserError
from a2x_local.llm import Engine, Request
from a2x_local.search.llm.budget import QueryBudget, Ranking, keep
from a2x_local.search.llm.config import LlmSearchConfig, answer_cap, answer_limit
from a2x_local.search.llm.grouping import Group
from a2x_local.search.llm.language_hint import LanguageHint
from a2x_local.search.llm.listing import numbered, shown_order
from a2x_local.search.llm.positions import parse_positions, positions_budget, positions_constraint
from a2x_local.search.llm.prompting import render
from a2x_local.search.llm.rounds import RoundRunner, note_choice

FINAL_KEY = "picks"


class ContextWindowError(UserError):
    """A prompt that cannot be split (the full catalogue) is larger than the model's context window."""


@dataclass
class SelectionJob:
    """One query's candidate groups."""

    query: str
    mode: str
    groups: list[Group]


@dataclass
class GroupResult:
    """One selection call: the group offered, the answer, the services chosen."""

    group: Group
    call: str
    mode: str
    answer: str | None
    selected: list[str]
    error: str | None = None
    capped: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {**self.group.to_dict(), "call": self.call, "mode": self.mode, "answer": self.answer,
                "selected": list(self.selected), "error": self.error, "capped": self.capped}


@dataclass
class Selection:
    """A query's selected services (in answer order), every call that produced them, and the lists its budget left
    unsent (``cut``)."""

    selected: list[str]
    calls: list[GroupResult] = field(default_factory=list)
    cut: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> list[dict[str, Any]]:
        return [call.to_dict() for call in self.calls]


@dataclass
class _Planned:
    job: int
    group: Group
    mode: str
    label: str
    request: Request


class Selector:
    """Selection requests over service lines ``lines`` (id -> `name: description`) with one prompt type; ``names``
    (id -> name) serve the services a pre-ranked group shows by name alone.

    ``split`` False is for the full-catalogue baseline: its one prompt must never be cut into parts, so a catalogue
    that does not fit the context window is reported instead (ContextWindowError). ``ordered`` shows every list in
    `option_order` (A2X's lists, in tree order; the baselines keep theirs: a catalogue, a retrieval ranking).
    """

    def __init__(self, lines: Mapping[str, str], engine: Engine, config: LlmSearchConfig, *,
                 call_type: str = "select", split: bool = True, names: Mapping[str, str] | None = None,
                 language: LanguageHint | None = None, ordered: bool = False) -> None:
        self.lines = lines
        self.language = language
        self.names = names or {}
        self.engine = engine
        self.config = config
        self.call_type = call_type
        self.split = split
        self.ordered = ordered

    def _shown(self, query: str, group: Group) -> Group:
        """The group as ``query`` is shown it: as it is, or (`option_order = "shuffled"`) its described services and
        those named alone each in an order drawn for the query and the list."""
        if not self.ordered:
            return group
        described = len(group.services) - group.brief
        head = shown_order(self.config, query, f"{group.key}#{group.part}", described)
        tail = shown_order(self.config, query, f"{group.key}#{group.part}#names", group.brief)
        if head is None and tail is None:
            return group
        services = group.services
        listed = ([services[k] for k in head] if head is not None else services[:described]) + (
            [services[described + k] for k in tail] if tail is not None else services[described:])
        return Group(group.key, listed, group.part, group.parts, held=list(group.held), brief=group.brief)

    def request(self, query: str, mode: str, group: Group, label: str) -> tuple[Request, int | None]:
        """The request for one group and the tokens left in the context window (None: window unknown)."""
        n = len(group.services)
        limit = answer_limit(mode, self.config.max_services_selected, n)
        cap = answer_cap(mode, limit, n)
        described = n - group.brief
        listing = numbered([self.lines[s] for s in group.services[:described]]
                           + [self.names[s] for s in group.services[described:]])
        across = self.language.needed(query) if self.language is not None else True
        messages = render(self.call_type, mode, cap=cap, layout=self.config.prompt_layout, across_languages=across,
                          services=listing, query=query)
        budget = positions_budget(n, limit, self.config.answer_margin_tokens)
        request = Request(messages=messages, constraint=positions_constraint(n, limit), max_tokens=budget,
                          label=label, temperature=self.config.temperature, seed=self.config.seed,
                          context={"call": label, "query": query, "mode": mode, "group": group.key,
                                   "options": list(group.services), "max_items": limit})
        # The prompt budget keeps selection prompts short (accuracy drops in long lists); the full-catalogue
        # baseline is one prompt by definition, so only the context window bounds it.
        limit = self.config.selection_prompt_tokens if self.split else None
        return request, self.engine.prompt_room(messages, budget, limit)

    def _fitted(self, job: int, query: str, mode: str, group: Group, label: str) -> list[_Planned]:
        """Requests for a group, halved until each fits the context window (or an error when it may not split)."""
        group = self._shown(query, group)
        request, room = self.request(query, mode, group, label)
        if room is None or room >= 0:
            return [_Planned(job, group, mode, label, request)]
        if not self.split or len(group.services) == 1:
            if self.split and self._fits_window(request):
                return [_Planned(job, group, mode, label, request)]  # one service over the budget: still send it
            needed = self.engine.count_prompt_tokens(request.messages)
            raise ContextWindowError(
                f"{self.call_type}: {len(group.services):,} services need {needed:,} prompt tokens plus"
                f" {request.max_tokens} answer tokens, more than the model's context window of"
                f" {self.engine.max_model_len:,} tokens (nothing was cut off or sent)",
                hint="use a model with a longer context (engine max_model_len), a smaller registry, or a method"
                " that shows the model short lists (a2x, select)")
        return [planned for part in group.halves() for planned in self._fitted(job, query, mode, part, label)]

    def _fits_window(self, request: Request) -> bool:
        window = self.engine.max_model_len
        return not window or self.engine.count_prompt_tokens(request.messages) + request.max_tokens <= window

    def _run(self, planned: list[_Planned], runner: RoundRunner) -> list[GroupResult]:
        for item in planned:
            runner.ledgers[item.job].candidates_shown += len(item.group.services)
        results = runner.run([p.job for p in planned], [p.request for p in planned])
        outcomes = []
        for item, result in zip(planned, results, strict=True):
            offered = len(item.group.services)
            chosen = parse_positions(result.value, offered) if result.ok else []
            note_choice(runner.ledgers[item.job], offered, chosen)
            cap = answer_cap(item.mode, item.request.context["max_items"], offered)
            capped = cap is not None and len(chosen) >= cap
            if capped:
                runner.ledgers[item.job].capped += 1
            outcomes.append(GroupResult(item.group, item.label, item.mode, result.text if result.ok else None,
                                        [item.group.services[i] for i in chosen], result.error, capped))
        return outcomes

    def select(self, jobs: Sequence[SelectionJob], runner: RoundRunner, *, budget: bool = False,
               ranking: Ranking | None = None) -> list[Selection]:
        """Selections for ``jobs`` (indexed like the runner's ledgers), in at most three rounds: the groups; then
        the held-back rest for queries that chose nothing (and get_one's follow-ups for the others); then get_one's
        follow-ups for queries that needed the rest. Every round carries all queries' requests. With ``budget``,
        each query sends only what its budget leaves, the lists first in its order (``ranking``) kept."""
        label = self.call_type
        selections = [Selection([]) for _ in jobs]
        offered: list[list[Group]] = [[] for _ in jobs]
        limits = (QueryBudget(self.config, self.engine, runner.ledgers) if budget else None), ranking
        self._round([planned for j, job in enumerate(jobs) for group in job.groups
                     for planned in self._fitted(j, job.query, job.mode, group, label)], runner, selections, offered,
                    limits)
        resting = {j for j, job in enumerate(jobs) if _wants_rest(job, selections[j])}
        second: list[_Planned] = []
        for j, job in enumerate(jobs):
            if j in resting:
                second += [planned for group in job.groups if group.held
                           for planned in self._fitted(j, job.query, job.mode, group.rest(), f"{label}_rest")]
            else:
                second += self._followups(j, job, selections[j], offered[j])
        self._round(second, runner, selections, offered, limits)
        third = [planned for j in sorted(resting) for planned in self._followups(j, jobs[j], selections[j], offered[j])]
        self._round(third, runner, selections, offered, limits)
        for job, selection in zip(jobs, selections, strict=True):
            selection.selected = _chosen(job.mode, selection.calls, label)
        return selections

    def _round(self, planned: list[_Planned], runner: RoundRunner, selections: list[Selection],
               offered: list[list[Group]], limits: tuple[QueryBudget | None, Ranking | None]) -> None:
        """One engine round (within each query's budget, when ``limits`` hold one); the groups of first and rest
        calls are remembered for get_one's fallback."""
        planned = self._within_budget(planned, selections, *limits)
        for item, outcome in zip(planned, self._run(planned, runner), strict=True):
            selections[item.job].calls.append(outcome)
            if not item.label.endswith(_FOLLOWUPS):
                offered[item.job].append(item.group)

    @staticmethod
    def _within_budget(planned: list[_Planned], selections: list[Selection], budget: QueryBudget | None,
                       ranking: Ranking | None) -> list[_Planned]:
        """The requests each query's budget lets through (all of them without one), in the order planned; the
        lists left out are noted on the query's selection."""
        if budget is None or not budget.limited or not planned:
            return planned
        items: dict[int, list[tuple[Request, frozenset[str]]]] = {}
        for item in planned:
            items.setdefault(item.job, []).append((item.request, frozenset(item.group.services)))
        allowed = {job: set(indexes) for job, indexes in keep(budget, ranking, items, descent=False).items()}
        seen: dict[int, int] = {}
        sent = []
        for item in planned:
            k = seen[item.job] = seen.get(item.job, -1) + 1
            if k in allowed[item.job]:
                sent.append(item)
            else:
                selections[item.job].cut.append({"key": item.group.key, "part": item.group.part,
                                                 "call": item.label, "services": len(item.group.services)})
        return sent

    def _followups(self, j: int, job: SelectionJob, selection: Selection, offered: list[Group]) -> list[_Planned]:
        """get_one after its list: one call among several parts' picks, or a get_important fallback when none."""
        if job.mode != "get_one":
            return []
        picks = _picks(selection.calls)
        label = self.call_type
        if len(picks) > 1:
            return self._fitted(j, job.query, "get_one", Group(FINAL_KEY, picks), f"{label}_final")
        if not picks:
            return [planned for group in offered
                    for planned in self._fitted(j, job.query, "get_important", group, f"{label}_fallback")]
        return []


_FOLLOWUPS = ("_final", "_fallback")


def _wants_rest(job: SelectionJob, selection: Selection) -> bool:
    """A query gets its groups' held-back services when it has any and its valid answers chose nothing."""
    return (any(group.held for group in job.groups) and not any(call.selected for call in selection.calls)
            and any(call.answer is not None for call in selection.calls))


def _picks(calls: Sequence[GroupResult]) -> list[str]:
    """get_one's first picks of its list calls (groups and rest), in call order, each once."""
    return list(dict.fromkeys(call.selected[0] for call in calls
                              if call.selected and not call.call.endswith(_FOLLOWUPS)))


def _chosen(mode: str, calls: Sequence[GroupResult], label: str) -> list[str]:
    """The answer: every service chosen, in call order (get_all, get_important); for get_one the final call's
    pick, else the one pick of its list, else the first pick of the fallback answers."""
    if mode != "get_one":
        return list(dict.fromkeys(s for call in calls for s in call.selected))
    final = [call.selected[0] for call in calls if call.call == f"{label}_final" and call.selected]
    if final:
        return final[:1]
    picks = _picks(calls)
    if picks:
        return picks[:1]
    fallback = [call.selected[0] for call in calls if call.call == f"{label}_fallback" and call.selected]
    return fallback[:1]
