"""Service selection: one constrained call per candidate group, for every query in flight in one engine round.

get_all and get_important answer positions (or NONE) per group. get_one answers one position: A2X gives it one
list (its one path's services), so it needs no further round unless that list had to be split to fit a prompt;
then one more call chooses among the parts' picks. When nothing is picked, the groups are asked again in
get_important mode and the first service chosen is taken. Both follow-ups of all queries share one round.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from a2x_local.errors import UserError
from a2x_local.llm import Engine, Request
from a2x_local.search.llm.config import LlmSearchConfig, answer_limit
from a2x_local.search.llm.grouping import Group
from a2x_local.search.llm.listing import numbered
from a2x_local.search.llm.positions import parse_positions, positions_budget, positions_constraint
from a2x_local.search.llm.prompting import render
from a2x_local.search.llm.rounds import RoundRunner, prompt_room

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
    """A query's selected services (in answer order) and every call that produced them."""

    selected: list[str]
    calls: list[GroupResult] = field(default_factory=list)

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
    """Selection requests over service lines ``lines`` (id -> `name: description`) with one prompt type.

    ``split`` False is for the full-catalogue baseline: its one prompt must never be cut into parts, so a catalogue
    that does not fit the context window is reported instead (ContextWindowError).
    """

    def __init__(self, lines: Mapping[str, str], engine: Engine, config: LlmSearchConfig, *,
                 call_type: str = "select", split: bool = True) -> None:
        self.lines = lines
        self.engine = engine
        self.config = config
        self.call_type = call_type
        self.split = split

    def request(self, query: str, mode: str, group: Group, label: str) -> tuple[Request, int | None]:
        """The request for one group and the tokens left in the context window (None: window unknown)."""
        n = len(group.services)
        limit = answer_limit(mode, self.config.max_services_selected, n)
        cap = limit if mode != "get_one" and limit < n else None
        listing = numbered([self.lines[s] for s in group.services])
        messages = render(self.call_type, mode, cap=cap, services=listing, query=query)
        budget = positions_budget(n, limit, self.config.answer_margin_tokens)
        request = Request(messages=messages, constraint=positions_constraint(n, limit), max_tokens=budget,
                          label=label, temperature=self.config.temperature, seed=self.config.seed,
                          context={"call": label, "query": query, "mode": mode, "group": group.key,
                                   "options": list(group.services), "max_items": limit})
        # The prompt budget keeps selection prompts short (accuracy drops in long lists); the full-catalogue
        # baseline is one prompt by definition, so only the context window bounds it.
        limit = self.config.selection_prompt_tokens if self.split else None
        return request, prompt_room(self.engine, messages, budget, limit)

    def _fitted(self, job: int, query: str, mode: str, group: Group, label: str) -> list[_Planned]:
        """Requests for a group, halved until each fits the context window (or an error when it may not split)."""
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
        half = len(group.services) // 2
        parts = [Group(group.key, group.services[:half], group.part, group.parts),
                 Group(group.key, group.services[half:], group.part, group.parts)]
        return [planned for part in parts for planned in self._fitted(job, query, mode, part, label)]

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
            limit = item.request.context["max_items"]
            capped = item.mode != "get_one" and limit < offered and len(chosen) >= limit
            if capped:
                runner.ledgers[item.job].capped += 1
            outcomes.append(GroupResult(item.group, item.label, item.mode, result.text if result.ok else None,
                                        [item.group.services[i] for i in chosen], result.error, capped))
        return outcomes

    def select(self, jobs: Sequence[SelectionJob], runner: RoundRunner) -> list[Selection]:
        """Selections for ``jobs`` (indexed like the runner's ledgers): one round, plus one for get_one follow-ups."""
        label = self.call_type
        first: list[_Planned] = []
        for j, job in enumerate(jobs):
            for group in job.groups:
                first.extend(self._fitted(j, job.query, job.mode, group, label))
        selections = [Selection([]) for _ in jobs]
        offered: dict[int, list[_Planned]] = {}
        for item, outcome in zip(first, self._run(first, runner), strict=True):
            selections[item.job].calls.append(outcome)
            offered.setdefault(item.job, []).append(item)
        followups: list[_Planned] = []
        for j, job in enumerate(jobs):
            calls = selections[j].calls
            if job.mode != "get_one":
                selections[j].selected = list(dict.fromkeys(s for call in calls for s in call.selected))
                continue
            picks = list(dict.fromkeys(call.selected[0] for call in calls if call.selected))
            selections[j].selected = picks[:1]
            if len(picks) > 1:
                followups.extend(self._fitted(j, job.query, "get_one", Group(FINAL_KEY, picks), f"{label}_final"))
            elif not picks:
                for item in offered.get(j, []):
                    followups.extend(self._fitted(j, job.query, "get_important", item.group, f"{label}_fallback"))
        for item, outcome in zip(followups, self._run(followups, runner), strict=True):
            selection = selections[item.job]
            selection.calls.append(outcome)
            # A final pick replaces the provisional first pick; of fallback answers, the first non-empty wins.
            if outcome.selected and (item.label.endswith("_final") or not selection.selected):
                selection.selected = outcome.selected[:1]
        return selections
