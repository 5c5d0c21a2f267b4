"""The level-synchronous build: every step of one level is one engine round across all nodes of that level.

``Builder.step`` advances the state to the end of the next engine round (doing the model-free work on the way:
vocabulary merging, finalising a level, the leaf-size re-check), so the caller can checkpoint after each round.
The number of sequential rounds therefore depends on depth and refine passes, not on the number of services. A
level's steps come from one table (`steps.STEPS`); cross-domain placement runs once the tree stands.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Protocol

from a2x_local.costs import Cost
from a2x_local.errors import UserError
from a2x_local.llm import Engine, Request, Result
from a2x_local.registry import Service
from a2x_local.taxonomy.config import BuildConfig
from a2x_local.taxonomy.induction import crossdomain, design
from a2x_local.taxonomy.induction.calls import Planned
from a2x_local.taxonomy.induction.finalise import finalise
from a2x_local.taxonomy.induction.state import BuildState, NodeWork
from a2x_local.taxonomy.induction.steps import STEPS, Level

SPLIT, CROSS_PICK, CROSS_PLACE, FINISHED = "split", "cross_pick", "cross_place", "done"
# Answers handed to the observer at a time (the progress bar moves while a long round runs).
_PROGRESS_EVERY = 256


class BuildAborted(UserError):
    """Too many answers of one round stayed invalid after the engine's retry; the build can be resumed."""


class RoundObserver(Protocol):
    """Told about every engine round (progress display). A round is streamed, so its size is known only at its
    end: ``services`` counts the services the round is about, ``round_answered`` comes with each answered chunk,
    ``round_finished`` with the round's requests and failures."""

    def round_started(self, step: str, level: int, services: int) -> None: ...

    def round_answered(self, step: str, results: Sequence[Result]) -> None: ...

    def round_finished(self, step: str, requests: int, failed: int) -> None: ...


@dataclass
class _Tally(Cost):
    """What one streamed round sent and got back, counted as its answers come (the answers are not kept); the token
    fields are the one cost type's."""

    requests: int = 0
    failed: int = 0
    truncated: int = 0
    first_error: str | None = None

    def add(self, result: Result) -> None:
        self.requests += 1
        self.calls += 1
        self.prompt_tokens += result.prompt_tokens
        self.completion_tokens += result.completion_tokens
        self.truncated += result.truncated
        if not result.ok:
            self.failed += 1
            self.first_error = self.first_error or result.error


class Builder:
    """Drives one build state forward with one engine, one round per ``step`` call."""

    def __init__(self, state: BuildState, services: Mapping[str, Service], config: BuildConfig, engine: Engine,
                 observer: RoundObserver | None = None) -> None:
        self.state = state
        self.services = services
        self.config = config
        self.engine = engine
        self.observer = observer
        # Description design requests rendered while choosing a node's mode, reused by its design round (not part
        # of the checkpoint: a resumed build renders them again, identically).
        self._described: dict[str, Request] = {}
        self._level = Level(services, config, engine, state, self._described)

    @property
    def finished(self) -> bool:
        return self.state.phase == FINISHED

    def step(self) -> str | None:
        """Run until one engine round has been answered and applied; return its step name (None when done)."""
        state = self.state
        while state.phase != FINISHED:
            if state.phase == SPLIT:
                ran = self._split_step()
            elif state.phase == CROSS_PICK:
                ran = self._cross_pick()
            else:
                ran = self._cross_place()
            if ran:
                return ran
        return None

    # -- splitting ---------------------------------------------------------------------------------------------

    def _split_step(self) -> str | None:
        state = self.state
        if not state.work:
            if not state.queue:
                self._after_splitting()
                return None
            self._start_level()
        step = next((s for s in STEPS if any(w.status == s.name for w in state.work.values())), None)
        if step is None:
            self._finalise_level()
            return None
        works = [state.work[n] for n in sorted(state.work) if state.work[n].status == step.name]
        ran = self._round(step.name, step.plan(self._level, works),
                          lambda plan, result: step.apply(self._level, state.work[plan.node], plan, result),
                          services=sum(len(work.services) for work in works))
        if step.after is not None:      # model-free work ending the step, for every node that took part
            for work in works:
                if work.status == step.name:
                    step.after(self._level, work)
        return step.name if ran else None

    def _start_level(self) -> None:
        state = self.state
        tree = state.tree()
        for node_id in sorted(state.queue):
            node = state.nodes[node_id]
            if len(node.services) <= self.config.leaf_max_services or node.depth >= self.config.max_depth:
                continue
            path = tree.path_names(node_id, with_root=True)
            work = NodeWork(node_id=node_id, path=path, services=list(node.services))
            request = design.choose_mode(work, self.services, self.config, self.engine, state)
            if request is None:
                self._described.pop(node_id, None)
            else:
                self._described[node_id] = request
            state.work[node_id] = work
        state.queue = []

    def _finalise_level(self) -> None:
        state = self.state
        for node_id in sorted(state.work):
            state.queue.extend(finalise(state, state.work[node_id], self.config))
        state.work = {}
        state.level += 1

    def _after_splitting(self) -> None:
        state = self.state
        root = state.nodes[state.root_id]
        if self.config.cross_domain and not state.cross_done and len(root.children) >= 2:
            state.phase = CROSS_PICK
        else:
            state.phase = FINISHED

    # -- cross-domain ------------------------------------------------------------------------------------------

    def _cross_pick(self) -> str | None:
        state = self.state
        recorder = crossdomain.PickRecorder(state)
        ran = self._round("crossdomain_pick", crossdomain.pick_requests(state, self.services, self.config,
                                                                          self.engine),
                          recorder.apply, services=len(recorder.tree.service_ids()))
        state.phase = CROSS_PLACE
        return "crossdomain_pick" if ran else None

    def _cross_place(self) -> str | None:
        state = self.state
        ran = self._round("crossdomain_place", crossdomain.place_requests(state, self.services, self.config,
                                                                          self.engine),
                          lambda plan, result: crossdomain.apply_place(plan, result, self.config, state),
                          services=len(state.cross_picks))
        state.cross_done = True
        state.cross_picks = []
        state.queue = crossdomain.overfull_leaves(state, self.config)
        state.count("leaves_resplit_after_cross_domain", len(state.queue))
        state.phase = SPLIT
        return "crossdomain_place" if ran else None

    # -- one engine round --------------------------------------------------------------------------------------

    def _round(self, step: str, planned: Iterable[Planned], apply: Callable[[Planned, Result], None], *,
               services: int) -> bool:
        """One engine round over ``planned``, streamed: requests are made as the engine takes them (`Engine.stream`,
        a bounded chunk at a time) and each answer is applied as it comes, so neither the round's prompts nor its
        answers are ever held whole. False when the step had nothing to ask."""
        plans = iter(planned)
        first = next(plans, None)
        if first is None:
            return False
        if self.observer:
            self.observer.round_started(step, self.state.level, services)
        waiting: deque[Planned] = deque()

        def requests() -> Iterator[Request]:
            for plan in chain((first,), plans):
                waiting.append(plan)
                yield plan.request

        tally = _Tally()
        rounds_before = self.engine.usage.rounds
        answered: list[Result] = []
        for result in self.engine.stream(requests()):
            apply(waiting.popleft(), result)
            tally.add(result)
            if self.observer:
                answered.append(result)
                if len(answered) >= _PROGRESS_EVERY:
                    self.observer.round_answered(step, answered)
                    answered = []
        if self.observer:
            self.observer.round_answered(step, answered)
            self.observer.round_finished(step, tally.requests, tally.failed)
        self.state.rounds.append({
            "step": step, "level": self.state.level, "requests": tally.requests, "failed": tally.failed,
            "truncated": tally.truncated, "engine_rounds": self.engine.usage.rounds - rounds_before,
            "prompt_tokens": tally.prompt_tokens, "completion_tokens": tally.completion_tokens,
        })
        if tally.failed and tally.failed > self.config.max_failed_fraction * tally.requests:
            cut = (f"; {tally.truncated} attempts were cut off at their token budget (a model that writes on)"
                   if tally.truncated else "")
            raise BuildAborted(
                f"{tally.failed} of {tally.requests} {step} answers stayed invalid after the retry"
                f" (first: {tally.first_error}){cut}",
                hint="check the model and its context window (max_model_len); lower budget_chars_per_token (larger"
                     " answer budgets) or raise max_failed_fraction in [build]; then `a2x-local build --resume`",
            )
        return True
