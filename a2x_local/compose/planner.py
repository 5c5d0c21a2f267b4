"""The planner: decompose every request, search every step, re-decompose with hints (SAD), compose the plans.

A `Composer` holds what planning needs across calls: a snapshot of the registry (names, schemas, servers, tree
categories), the step search method, the decomposer and, when a model is involved, one engine shared by the
decomposer and an LLM step method. Each `plan` call handles a batch: one engine call per decomposition round for
all requests, one `search_batch` for all steps of all requests per round.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import cached_property
from typing import Any

from a2x_local.compose.assemble import Retrieved, Scoring, assemble, confidence_shares, merged_ranking
from a2x_local.compose.compatibility import KeywordWeights, Profile, jaccard
from a2x_local.compose.config import ComposeConfig
from a2x_local.compose.decompose import ModelDecomposer, prompt_hash
from a2x_local.compose.naming import NameIndex, put_first
from a2x_local.compose.references import link_inputs, retrieval_text
from a2x_local.compose.relevance import Confidence, Evidence, Relevance
from a2x_local.compose.rerank import Reranker, RerankItem
from a2x_local.compose.rerank import prompt_hash as rerank_prompt_hash
from a2x_local.compose.rules import rule_draft
from a2x_local.compose.sad import copied_steps, hint_ids, hint_names
from a2x_local.compose.steps_file import StepsBook
from a2x_local.compose.types import Plan, SadReport, SadRound, Step
from a2x_local.costs import AnswerCost
from a2x_local.errors import UserError
from a2x_local.llm import Engine
from a2x_local.search import SearchAnswer, SearchMethod, SearchRequest, check_mode, check_queries


@dataclass
class Planned:
    """A plan and the per-step rankings behind it (deeper than the candidates a plan keeps), for ranked answers;
    ``whole`` is the ranking of the request as a whole (searched for plans of several steps)."""

    plan: Plan
    rankings: list[list[str]]
    whole: list[str] = field(default_factory=list)
    shares: list[float] | None = None

    def ranking(self, depth: int) -> list[str]:
        """The plan as one ranked answer: the chosen services first, then every step's ranking and the whole
        request's, each getting places by its share (`[compose] ranking_shares`: the unsure steps more) or in
        turns. The whole request is one more view of its needs: it finds what a step's words alone miss ("... and
        then check what it will do to our AWS bill")."""
        return merged_ranking(self.plan.services, [*self.rankings, *([self.whole] if self.whole else [])], depth,
                              self.shares)


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

    orders: list[list[str] | None] = field(default_factory=list)    # a re-ranker's order per step
    named: dict[str, list[str]] = field(default_factory=dict)     # step text -> the services it names

    def queries(self) -> list[str]:
        """A one-step plan searches the request itself: a single need behaves exactly like plain search. A step
        searches its task without the list marker and sequence words it opens with, and a step that takes an earlier
        one's output without its words about that output (`references.retrieval_text`)."""
        return [self.request] if len(self.steps) == 1 else [retrieval_text(step) for step in self.steps]


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
            work.ledger.add(AnswerCost.side_by_side(answer.cost for answer in mine.values()))
            self.seen.update(mine)

    def retrieved(self, text: str, order: list[str] | None = None, named: Sequence[str] = ()) -> Retrieved:
        """What the search of ``text`` found, in a re-ranker's ``order`` when one is given, the services the
        step ``named`` first."""
        answer = self.seen[text]
        scores = {hit.service_id: hit.score for hit in answer.hits}
        ids = put_first(order if order is not None else answer.ids, named)
        return Retrieved(ids, [scores.get(service_id) for service_id in ids], answer.error, list(named))

    def rankings(self, work: _Work) -> list[list[str]]:
        return [self.seen[text].ids for text in work.queries()]


class Composer:
    """Plans requests with one decomposer and one step method over one registry snapshot (see `open_composer`)."""

    def __init__(self, *, config: ComposeConfig, method: SearchMethod, method_name: str, names: Mapping[str, str],
                 profiles: Mapping[str, Profile], decomposer: str, model: ModelDecomposer | None = None,
                 steps: StepsBook | None = None, engine: Engine | None = None, owns_engine: bool = False,
                 step_modes: Sequence[str] = (), notes: Sequence[str] = (), relevance: Relevance | None = None,
                 weights: KeywordWeights | None = None, reranker: Reranker | None = None) -> None:
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
        self.relevance = relevance        # the dense model's cosines: Eq. 4's sim, confidence, registry probes
        self.reranker = reranker
        self.scoring = Scoring(config.alpha, config.signals, weights,
                               Confidence(config.confidence_z, config.confidence_scale, config.low_confidence),
                               config.neighbour_penalty, config.credit_substitutes)

    @property
    def label(self) -> str:
        """Who decomposes, as every plan names it."""
        if self.model is not None:
            return self.model.label
        if self.steps_book is not None:
            return self.steps_book.label
        return "rule"

    def plan(self, requests: Sequence[str], *, k: int | None = None, sad: bool | None = None,
             mode: str | None = None, rerank: bool | None = None) -> list[Plan]:
        """One plan per request; ``k`` candidates per step, ``sad`` and ``rerank`` on or off (default: the
        configuration)."""
        return [planned.plan for planned in self.plan_ranked(requests, k=k, sad=sad, mode=mode, rerank=rerank)]

    def plan_ranked(self, requests: Sequence[str], *, k: int | None = None, sad: bool | None = None,
                    mode: str | None = None, depth: int | None = None, rerank: bool | None = None) -> list[Planned]:
        """Plans with each step's ranking searched ``depth`` deep (at least ``k``), for ranked answers; ``rerank``
        on or off (default: the configuration; needs a model)."""
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
        use_rerank = self.config.rerank if rerank is None else rerank
        if use_rerank and self.reranker is None:
            raise UserError("re-ranking needs a model, and this composer has none",
                            hint="give --model ALIAS (see `a2x-local models list`), or leave out --rerank")
        # Deep enough for the plan's candidates, a ranked answer's depth, the hints SAD shows, the list re-ranked.
        depth = max(depth or 0, candidates, self.config.sad_hints if run_sad else 0,
                    self.config.rerank_candidates if use_rerank else 0)
        works = [_Work(request, []) for request in requests]
        self._decompose(works)
        search = StepSearch(self.method, mode)
        search.run([self._texts(work) for work in works], depth, works)
        if run_sad:
            self._sad(works, search, depth)
        else:
            reason = ("off" if not use_sad or self.config.sad_rounds == 0 else
                      f"needs a model decomposer (this plan's: {self.label})")
            for work in works:
                work.sad = SadReport(applied=False, reason=reason)
        if use_rerank:
            self._rerank(works, search)
        evidence = self._evidence(works, search, candidates)
        seconds = (time.perf_counter() - started) / len(works)
        return [self._finish(work, search, candidates, seconds, evidence) for work in works]

    def _decompose(self, works: Sequence[_Work]) -> None:
        if self.steps_book is not None:
            for work in works:
                work.steps = link_inputs(self.steps_book.steps_for(work.request))
            return
        if self.model is None:
            drafts = [rule_draft(work.request) for work in works]
            questions = list(dict.fromkeys(q for draft in drafts for q in draft.questions()))
            answers = None
            if questions and self.relevance is not None and self.config.probe:
                answers = dict(zip(questions, self.relevance.probe(questions), strict=True))
            for work, draft in zip(works, drafts, strict=True):
                work.steps = link_inputs(draft.steps(self.config.max_steps, answers))
            return
        outcomes = self.model.decompose([w.request for w in works], [w.ledger for w in works])
        for work, outcome in zip(works, outcomes, strict=True):
            if outcome.steps is None:
                work.steps = [Step(id="s1", task=work.request)]
                work.failed = True
                work.notes.append(f"decomposition failed ({outcome.error}); the request was searched as one step")
            else:
                work.steps = link_inputs(outcome.steps)
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
                work.steps = link_inputs(outcome.steps)
                work.notes += outcome.repairs
                work.sad.rounds.append(SadRound(round=number, hints=names, steps=outcome.steps, kept=True))
                trying.append(work)
            search.run([self._texts(work) for work in trying], depth, trying)
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

    def _texts(self, work: _Work) -> list[str]:
        """What to search for a request: its steps, and for a plan of several steps the whole request too, for its
        ranked answer (`Planned.ranking`); the latter only with a retrieval step method, where one more text in the
        batch is nearly free (an LLM method would pay a descent for it)."""
        whole = [work.request] if len(work.steps) > 1 and not self.step_modes else []
        return [*work.queries(), *whole]

    def _rerank(self, works: Sequence[_Work], search: StepSearch) -> None:
        """Every step of every request re-ranked by the model in one engine call (listwise, constrained)."""
        assert self.reranker is not None
        items, owners = [], []
        for work in works:
            work.orders = [None] * len(work.steps)
            for index, text in enumerate(work.queries()):
                items.append(RerankItem(work.request, text, search.seen[text].ids))
                owners.append((work, index))
        for (work, index), outcome in zip(owners, self.reranker.rerank(items), strict=True):
            work.orders[index] = outcome.order
            # Side by side with the other steps' lists: the round is counted once per request below.
            work.ledger.add(AnswerCost(calls=outcome.cost.calls, prompt_tokens=outcome.cost.prompt_tokens,
                                       completion_tokens=outcome.cost.completion_tokens))
            if outcome.cost.calls and outcome.order is None:
                work.notes.append(f"re-ranking step s{index + 1} failed; its retrieval order was kept")
        for work in works:
            if any(outcome is not None for outcome in work.orders):
                work.ledger.rounds += 1

    def _evidence(self, works: Sequence[_Work], search: StepSearch, candidates: int,
                  ) -> dict[tuple[str, tuple[str, ...]], list[Evidence]]:
        """Cosine and z of every step's kept candidates, and (for plans of several steps) the cosine of those
        candidates with the plan's other steps, all steps of all requests in one batch."""
        if self.relevance is None:
            return {}
        wanted: dict[tuple[str, tuple[str, ...]], None] = {}
        for work in works:
            texts = work.queries()
            kept = [tuple(self._retrieved(work, search, text, order).ids[:candidates])
                    for text, order in zip(texts, work.orders or [None] * len(texts), strict=True)]
            for text, ids in zip(texts, kept, strict=True):
                wanted[(text, ids)] = None
                if self.config.neighbour_penalty > 0:
                    wanted.update({(other, ids): None for other in texts if other != text})
        keys = list(wanted)
        found = self.relevance.evidence([text for text, _ in keys], [list(ids) for _, ids in keys])
        return dict(zip(keys, found, strict=True))

    def _rivals(self, queries: Sequence[str], kept: Sequence[Sequence[str]],
                evidence: Mapping[tuple[str, tuple[str, ...]], list[Evidence]]) -> list[list[float | None]] | None:
        """For each step's kept candidates, how much of their likeness is another step's: the largest, over the
        plan's other steps, of (cosine of the two steps) x (cosine of that step and the candidate). It is what
        taking the other step's direction out of this step's vector (one Gram-Schmidt step) takes off a cosine."""
        if self.relevance is None or self.config.neighbour_penalty <= 0 or len(queries) < 2:
            return None
        alike = self.relevance.alike(queries)
        rivals = []
        for index, (text, ids) in enumerate(zip(queries, kept, strict=True)):
            rows = [(alike[index][other_index], evidence.get((other, tuple(ids))))
                    for other_index, other in enumerate(queries) if other != text]
            best: list[float | None] = []
            for column in range(len(ids)):
                values = [weight * row[column].cosine for weight, row in rows
                          if row is not None and row[column].cosine is not None]
                best.append(max(values) if values else None)
            rivals.append(best)
        return rivals

    @cached_property
    def name_index(self) -> NameIndex:
        """The registry's product names (built on the first plan that needs them)."""
        return NameIndex(self.names)

    def _retrieved(self, work: _Work, search: StepSearch, text: str, order: list[str] | None) -> Retrieved:
        """A step's candidates: with several steps, the services its text names go first (`naming.py`); a
        one-step plan is plain search of the request."""
        if text not in work.named:   # looked up once: the evidence and the assembly both ask
            wanted = self.config.named_services and len(work.steps) > 1
            work.named[text] = self.name_index.named(text) if wanted else []
        return search.retrieved(text, order, work.named[text])

    def _finish(self, work: _Work, search: StepSearch, candidates: int, seconds: float,
                evidence: dict[tuple[str, tuple[str, ...]], list[Evidence]]) -> Planned:
        queries = work.queries()
        orders = work.orders or [None] * len(queries)
        retrieved = [self._retrieved(work, search, text, order) for text, order in zip(queries, orders, strict=True)]
        proof = [evidence.get((text, tuple(found.ids[:candidates]))) for text, found in
                 zip(queries, retrieved, strict=True)]
        rivals = self._rivals(queries, [found.ids[:candidates] for found in retrieved], evidence)
        assembly = assemble(work.steps, queries, retrieved, candidates=candidates, names=self.names,
                            profiles=self.profiles, scoring=self.scoring,
                            evidence=[p or [] for p in proof] if self.relevance is not None else None,
                            orders=[ids[:candidates] if ids else None for ids in orders], rivals=rivals)
        errors = [step.error for step in assembly.steps if step.error]
        # The plan failed only when no step could be searched; a failed decomposition is a note (searched whole).
        error = f"step search failed: {errors[0]}" if errors and len(errors) == len(queries) else None
        plan = Plan(request=work.request, decomposer=self.label, method=self.method_name, steps=assembly.steps,
                    edges=assembly.edges, groups=assembly.groups, services=assembly.services, sad=work.sad,
                    seconds=round(seconds, 6), notes=[*self.notes, *work.notes], error=error,
                    **asdict(work.ledger))
        whole = search.seen[work.request].ids if len(queries) > 1 and work.request in search.seen else []
        shares = (confidence_shares(assembly.steps, bool(whole), self.config.share_floor)
                  if self.config.ranking_shares == "confidence" and len(assembly.steps) > 1 else None)
        return Planned(plan, assembly.rankings, whole, shares)

    def variant(self, **overrides: Any) -> Composer:
        """A composer like this one with other `[compose]` values (alpha, signals, probe, rerank, ...), sharing its
        registry snapshot, step method, dense model and engine (closing it leaves them to this one)."""
        config = type(self.config).model_validate({**self.config.model_dump(), **overrides})
        return Composer(config=config, method=self.method, method_name=self.method_name, names=self.names,
                        profiles=self.profiles, decomposer=self.decomposer, model=self.model, steps=self.steps_book,
                        engine=self.engine, owns_engine=False, step_modes=self.step_modes, notes=self.notes,
                        relevance=self.relevance, weights=self.scoring.weights, reranker=self.reranker)

    def describe(self) -> dict[str, Any]:
        """What makes two composers plan alike (recorded with evaluation runs)."""
        return {"method": "compose", "decomposer": self.label, "step_method": self.method_name,
                "step": self.method.describe(),
                "config": self.config.model_dump(), "prompts": prompt_hash()[:16],
                "rerank_prompt": rerank_prompt_hash()[:16] if self.reranker is not None else None,
                "similarity": self.relevance.model if self.relevance is not None else None,
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
