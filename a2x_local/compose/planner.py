"""The planner: decompose every request, search every step, re-decompose with hints (SAD), compose the plans.

A `Composer` holds what planning needs across calls: a snapshot of the registry (names, schemas, servers, tree
categories), the step search method, the decomposer and, when a model is involved, one engine shared by the
decomposer and an LLM step method. Each `plan` call handles a batch: one engine call per decomposition round for
all requests, one `search_batch` for all steps of all requests per round.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from a2x_local.compose.assemble import Retrieved, assemble
from a2x_local.compose.compatibility import Profile, jaccard
from a2x_local.compose.config import ComposeConfig
from a2x_local.compose.decompose import ModelDecomposer, prompt_hash
from a2x_local.compose.rules import rule_steps
from a2x_local.compose.sad import copied_steps, hint_ids, hint_names
from a2x_local.compose.steps_file import StepsBook
from a2x_local.compose.types import Plan, SadReport, SadRound, Step
from a2x_local.costs import AnswerCost
from a2x_local.llm import Engine
from a2x_local.search import SearchAnswer, SearchMethod, SearchRequest, check_mode, check_queries


@dataclass
class Planned:
    """A plan and the per-step rankings behind it (deeper than the candidates a plan keeps), for ranked answers."""

    plan: Plan
    rankings: list[list[str]]


@dataclass
class _Work:
    """One request in flight: its current steps, what was searched for them, and its costs."""

    request: str
    steps: list[Step]
    ledger: AnswerCost = field(default_factory=AnswerCost)
    notes: list[str] = field(default_factory=list)
    failed: bool = False     # the model's decomposition never validated: searched as one step
    sad: SadReport = field(default_factory=lambda: SadReport(applied=False))
    hints: list[str] = field(default_factory=list)   # SAD: the service ids last shown to the model

    def queries(self) -> list[str]:
        """A one-step plan searches the request itself: a single need behaves exactly like plain search."""
        return [self.request] if len(self.steps) == 1 else [step.task for step in self.steps]


class StepSearch:
    """Searches step texts in one batch per round, each distinct text once (an LLM method pays for it once), and
    charges each search's cost to the first request of the round that asked for it."""

    def __init__(self, method: SearchMethod, mode: str | None) -> None:
        self.method = method
        self.mode = mode
        self.seen: dict[str, SearchAnswer] = {}

    def run(self, texts_by_work: Sequence[Sequence[str]], depth: int, works: Sequence[_Work]) -> None:
        fresh = list(dict.fromkeys(t for texts in texts_by_work for t in texts if t not in self.seen))
        if not fresh:
            return
        answers = dict(zip(fresh, self.method.search_batch([SearchRequest(text, k=depth, mode=self.mode)
                                                             for text in fresh]), strict=True))
        for work, texts in zip(works, texts_by_work, strict=True):
            mine = {text: answers.pop(text) for text in dict.fromkeys(texts) if text in answers}
            # The steps of one request were searched together: its rounds are the deepest search's, not the sum.
            work.ledger.add(AnswerCost.side_by_side(mine.values()))
            self.seen.update(mine)

    def retrieved(self, text: str) -> Retrieved:
        answer = self.seen[text]
        return Retrieved(answer.ids, [hit.score for hit in answer.hits], answer.error)

    def rankings(self, work: _Work) -> list[list[str]]:
        return [self.seen[text].ids for text in work.queries()]


class Composer:
    """Plans requests with one decomposer and one step method over one registry snapshot (see `open_composer`)."""

    def __init__(self, *, config: ComposeConfig, method: SearchMethod, method_name: str, names: Mapping[str, str],
                 profiles: Mapping[str, Profile], decomposer: str, model: ModelDecomposer | None = None,
                 steps: StepsBook | None = None, engine: Engine | None = None, owns_engine: bool = False,
                 step_modes: Sequence[str] = (), notes: Sequence[str] = ()) -> None:
        self.config = config
        self.method = method
        self.method_name = method_name
        self.names = names
        self.profiles = profiles
        self.decomposer = decomposer      # "model", "rule" or "file"
        self.model = model
        self.steps_book = steps
        self.engine = engine
        self.owns_engine = owns_engine
        self.step_modes = tuple(step_modes)
        self.notes = list(notes)

    @property
    def label(self) -> str:
        """Who decomposes, as every plan names it."""
        if self.model is not None:
            return self.model.label
        if self.steps_book is not None:
            return self.steps_book.label
        return "rule"

    def plan(self, requests: Sequence[str], *, k: int | None = None, sad: bool | None = None,
             mode: str | None = None) -> list[Plan]:
        """One plan per request; ``k`` candidates per step, ``sad`` on or off (default: the configuration)."""
        return [planned.plan for planned in self.plan_ranked(requests, k=k, sad=sad, mode=mode)]

    def plan_ranked(self, requests: Sequence[str], *, k: int | None = None, sad: bool | None = None,
                    mode: str | None = None, depth: int | None = None) -> list[Planned]:
        """Plans with each step's ranking searched ``depth`` deep (at least ``k``), for ranked answers."""
        if not requests:
            return []
        check_queries(requests)
        check_mode(self.method_name, self.step_modes, mode, role="step method")
        if self.steps_book is not None:
            self.steps_book.check_covers(requests)
        started = time.perf_counter()
        candidates = k or self.config.candidates
        use_sad = self.config.sad if sad is None else sad
        run_sad = self.model is not None and use_sad and self.config.sad_rounds > 0
        # Deep enough for the plan's candidates, a ranked answer's depth, and the hints SAD shows.
        depth = max(depth or 0, candidates, self.config.sad_hints if run_sad else 0)
        works = [_Work(request, []) for request in requests]
        self._decompose(works)
        search = StepSearch(self.method, mode)
        search.run([work.queries() for work in works], depth, works)
        if run_sad:
            self._sad(works, search, depth)
        else:
            reason = ("off" if not use_sad or self.config.sad_rounds == 0 else
                      f"needs a model decomposer (this plan's: {self.label})")
            for work in works:
                work.sad = SadReport(applied=False, reason=reason)
        seconds = (time.perf_counter() - started) / len(works)
        return [self._finish(work, search, candidates, seconds) for work in works]

    def _decompose(self, works: Sequence[_Work]) -> None:
        if self.steps_book is not None:
            for work in works:
                work.steps = self.steps_book.steps_for(work.request)
            return
        if self.model is None:
            for work in works:
                work.steps = rule_steps(work.request, self.config.max_steps)
            return
        outcomes = self.model.decompose([w.request for w in works], [w.ledger for w in works])
        for work, outcome in zip(works, outcomes, strict=True):
            if outcome.steps is None:
                work.steps = [Step(id="s1", task=work.request)]
                work.failed = True
                work.notes.append(f"decomposition failed ({outcome.error}); the request was searched as one step")
            else:
                work.steps = outcome.steps
                work.notes += outcome.repairs

    def _sad(self, works: Sequence[_Work], search: StepSearch, depth: int) -> None:
        assert self.model is not None
        active = [work for work in works if not work.failed]
        for work in works:
            work.sad = SadReport(applied=not work.failed, first_steps=list(work.steps),
                                 reason="the first decomposition failed" if work.failed else "")
        for work in active:
            work.hints = hint_ids(search.rankings(work), self.config.sad_hints)
        for number in range(1, self.config.sad_rounds + 1):
            if not active:
                return
            shown = [hint_names(work.hints, self.names) for work in active]
            outcomes = self.model.decompose([w.request for w in active], [w.ledger for w in active], hints=shown)
            trying = []
            for work, names, outcome in zip(active, shown, outcomes, strict=True):
                if outcome.steps is None:
                    work.sad.rounds.append(SadRound(round=number, hints=names, steps=[], kept=False,
                                                    reason=f"no valid answer: {outcome.error}"))
                    continue
                copies = copied_steps(outcome.steps, names)
                if copies:
                    work.sad.copy_rejected += 1
                    work.sad.rounds.append(SadRound(round=number, hints=names, steps=outcome.steps, kept=False,
                                                    reason=f"steps {', '.join(copies)} copy service names"))
                    continue
                work.steps = outcome.steps
                work.notes += outcome.repairs
                work.sad.rounds.append(SadRound(round=number, hints=names, steps=outcome.steps, kept=True))
                trying.append(work)
            search.run([work.queries() for work in trying], depth, trying)
            still = []
            for work in trying:
                new = hint_ids(search.rankings(work), self.config.sad_hints)
                overlap = jaccard(work.hints, new)
                work.sad.rounds[-1].jaccard = round(overlap, 4)
                work.hints = new
                if overlap > self.config.sad_stop_jaccard:
                    work.sad.rounds[-1].reason = "hints settled"
                else:
                    still.append(work)
            active = still

    def _finish(self, work: _Work, search: StepSearch, candidates: int, seconds: float) -> Planned:
        queries = work.queries()
        assembly = assemble(work.steps, queries, [search.retrieved(text) for text in queries],
                            candidates=candidates, alpha=self.config.alpha, names=self.names,
                            profiles=self.profiles)
        errors = [step.error for step in assembly.steps if step.error]
        # The plan failed only when no step could be searched; a failed decomposition is a note (searched whole).
        error = f"step search failed: {errors[0]}" if errors and len(errors) == len(queries) else None
        plan = Plan(request=work.request, decomposer=self.label, method=self.method_name, steps=assembly.steps,
                    edges=assembly.edges, groups=assembly.groups, services=assembly.services, sad=work.sad,
                    seconds=round(seconds, 6), notes=[*self.notes, *work.notes], error=error,
                    **work.ledger.cost_values())
        return Planned(plan, assembly.rankings)

    def describe(self) -> dict[str, Any]:
        """What makes two composers plan alike (recorded with evaluation runs)."""
        describe = getattr(self.method, "describe", None)
        return {"method": "compose", "decomposer": self.label, "step_method": self.method_name,
                "step": describe() if callable(describe) else {"method": self.method_name},
                "config": self.config.model_dump(), "prompts": prompt_hash()[:16],
                "engine": self.engine.describe() if self.engine is not None else None,
                "steps_file": str(self.steps_book.path) if self.steps_book is not None else None}

    def close(self) -> None:
        """Release the engine this composer started (one passed in stays with its owner)."""
        if self.owns_engine and self.engine is not None:
            self.engine.close()
            self.engine = None

    def __enter__(self) -> Composer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
