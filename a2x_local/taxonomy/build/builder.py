"""The level-synchronous build: every step of one level is one engine round across all nodes of that level.

``Builder.step`` advances the state to the end of the next engine round (doing the model-free work on the way:
vocabulary merging, finalising a level, the leaf-size re-check), so the caller can checkpoint after each round.
The number of sequential rounds therefore depends on depth and refine passes, not on the number of services. A
level's steps come from one table (`steps.STEPS`); cross-domain placement runs once the tree stands.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from a2x_local.errors import UserError
from a2x_local.llm import Engine, Request, Result
from a2x_local.registry import Service
from a2x_local.taxonomy.build import crossdomain, design
from a2x_local.taxonomy.build.calls import Planned
from a2x_local.taxonomy.build.finalise import finalise
from a2x_local.taxonomy.build.state import BuildState, NodeWork
from a2x_local.taxonomy.build.steps import STEPS, Level
from a2x_local.taxonomy.config import BuildConfig

SPLIT, CROSS_PICK, CROSS_PLACE, FINISHED = "split", "cross_pick", "cross_place", "done"


class BuildAborted(UserError):
    """Too many answers of one round stayed invalid after the engine's retry; the build can be resumed."""


class RoundObserver(Protocol):
    """Told about every engine round (progress display); ``services`` counts the services the round is about."""

    def round_started(self, step: str, level: int, requests: int, services: int) -> None: ...

    def round_finished(self, step: str, results: Sequence[Result]) -> None: ...


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
        planned = step.plan(self._level, works)
        if planned:
            results = self._round(step.name, planned)
            for plan, result in zip(planned, results, strict=True):
                step.apply(self._level, state.work[plan.node], plan, result)
        if step.after is not None:      # model-free work ending the step, for every node that took part
            for work in works:
                if work.status == step.name:
                    step.after(self._level, work)
        return step.name if planned else None

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
        planned = crossdomain.pick_requests(state, self.services, self.config, self.engine)
        if planned:
            crossdomain.apply_picks(planned, self._round("crossdomain_pick", planned), state)
        state.phase = CROSS_PLACE
        return "crossdomain_pick" if planned else None

    def _cross_place(self) -> str | None:
        state = self.state
        planned = crossdomain.place_requests(state, self.services, self.config, self.engine)
        if planned:
            results = self._round("crossdomain_place", planned)
            for plan, result in zip(planned, results, strict=True):
                crossdomain.apply_place(plan, result, self.config, state)
        state.cross_done = True
        state.cross_picks = []
        state.queue = crossdomain.overfull_leaves(state, self.config)
        state.count("leaves_resplit_after_cross_domain", len(state.queue))
        state.phase = SPLIT
        return "crossdomain_place" if planned else None

    # -- one engine round --------------------------------------------------------------------------------------

    def _round(self, step: str, planned: list[Planned]) -> list[Result]:
        requests = [p.request for p in planned]
        if self.observer:
            services = sum(len(p.items) for p in planned) or sum(
                len(self.state.work[p.node].services) for p in planned if p.node in self.state.work)
            self.observer.round_started(step, self.state.level, len(requests), services)
        rounds_before = self.engine.usage.rounds
        results = self.engine.generate(requests)
        failed = [r for r in results if not r.ok]
        self.state.rounds.append({
            "step": step, "level": self.state.level, "requests": len(requests), "failed": len(failed),
            "engine_rounds": self.engine.usage.rounds - rounds_before,
            "prompt_tokens": sum(r.prompt_tokens for r in results),
            "completion_tokens": sum(r.completion_tokens for r in results),
        })
        if self.observer:
            self.observer.round_finished(step, results)
        if failed and len(failed) > self.config.max_failed_fraction * len(requests):
            raise BuildAborted(
                f"{len(failed)} of {len(requests)} {step} answers stayed invalid after the retry"
                f" (first: {failed[0].error})",
                hint="check the model and its context window (max_model_len); lower budget_chars_per_token (larger"
                     " answer budgets) or raise max_failed_fraction in [build]; then `a2x-local build --resume`",
            )
        return results
