"""Plans for compositional requests (the compose stage) as a server operation: `POST /v1/compose` and the MCP tool
`compose_plan`.

A composer is opened per registry snapshot and step method, on a worker thread, and kept while the snapshot
lasts, so a plan is made against the same registry and tree as the searches answered beside it. It uses the
server's one engine (behind the shared rounds, so its decomposition and step searches share engine rounds with
concurrent searches) and never starts another: without a model the rule decomposer splits requests. A plan waits
for what is still loading, as a search does, and its client hears progress meanwhile.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from a2x_local.compose import COMPOSE_SPEC, Plan, open_composer
from a2x_local.serve.discovery import Discovery, counted
from a2x_local.serve.errors import BadRequest, ModelCallFailed, TimedOut
from a2x_local.serve.progress import Activity, Report, with_progress
from a2x_local.serve.snapshot import Snapshot
from a2x_local.serve.views import Detail


class ComposeQuery(BaseModel):
    """One compositional request: the compose stage's options that a client may choose."""

    model_config = ConfigDict(extra="forbid")

    request: str = Field(description="What the agent needs done, possibly several steps, in words.")
    k: int | None = Field(None, description="Candidates kept per step (the choice and its alternatives).")
    method: str | None = Field(None, description="Search method for every step (default: the [compose] step_method).")
    mode: str | None = Field(None, description="LLM step methods: get_all | get_important | get_one.")
    sad: bool | None = Field(None, description="Skill-aware re-decomposition (with a model only).")


class Planning:
    """Makes plans within the server's limits; composers are kept per (snapshot, step method)."""

    def __init__(self, discovery: Discovery) -> None:
        self.discovery = discovery
        self.state = discovery.state
        self.config = discovery.config
        self._composers: dict[tuple[Any, str | None], Any] = {}
        self._lock = threading.Lock()

    def check(self, query: ComposeQuery) -> None:
        """Refuse what is outside the limits before any work (400), and model-only choices without a model (503)."""
        self.discovery.check_limits(query.request, query.k, what="request",
                                    example="'book a flight, then a hotel near the airport'")
        if query.method is not None:
            if query.method == COMPOSE_SPEC.name:
                raise BadRequest("compose makes the plan; it is not a method to search its steps with",
                                 code="UnknownMethod",
                                 hint=f"pick a step method: {', '.join(self.state.offered(steps=True))}")
            self.state.check_method(query.method, steps=True)

    def _composer(self, snapshot: Snapshot, method: str | None) -> Any:
        """The composer for this snapshot and step method (opened once, on a worker thread)."""
        key = (snapshot.identity, method)
        with self._lock:
            found = self._composers.get(key)
            if found is not None:
                return found
            for old_key in [k for k in self._composers if k[0] != snapshot.identity]:
                self._composers.pop(old_key).close()      # a new snapshot: plans use the new registry and tree
            engine = self.state.engine
            with self.state.database():
                composer = open_composer(self.state.runtime_settings, db_path=self.state.db_path, engine=engine,
                                         step_method=method, decomposer=None if engine is not None else "rule",
                                         start_engine=False)
            self._composers[key] = composer
            return composer

    def _plan(self, snapshot: Snapshot, query: ComposeQuery) -> Plan:
        composer = self._composer(snapshot, query.method)
        with self.state.participant():
            return composer.plan([query.request.strip()], k=query.k, sad=query.sad, mode=query.mode)[0]

    async def plan(self, query: ComposeQuery, report: Report | None = None) -> Plan:
        """One plan, made on a worker thread within the server's time-out."""
        activity = Activity()
        return await with_progress(self._planned(query, activity), report, activity)

    async def _planned(self, query: ComposeQuery, activity: Activity) -> Plan:
        self.check(query)
        snapshot = await self.discovery.snapshot(activity)
        if self.state.engine_expected:
            await self.discovery.wait_for(self.state.engine_ready, activity, "loading the model", "model")
        activity.set("planning: decomposing the request and searching its steps")
        loop = asyncio.get_running_loop()
        with counted(self.discovery.metrics, "compose", failure="the plan failed", code="ComposeFailed"):
            try:
                plan = await asyncio.wait_for(loop.run_in_executor(None, self._plan, snapshot, query),
                                              self.config.request_timeout_s)
            except TimeoutError as exc:
                raise TimedOut(f"no plan within {self.config.request_timeout_s:g} s", code="Timeout",
                               hint="try again, or a shorter request") from exc
            if plan.error:
                raise ModelCallFailed(f"no step of this request could be searched: {plan.error}",
                                      code="ComposeFailed",
                                      hint="try again; if it persists, check the model (a2x-local models check)")
        return plan

    def close(self) -> None:
        with self._lock:
            for composer in self._composers.values():
                composer.close()
            self._composers.clear()


def brief_plan(plan: Plan, detail: Detail) -> dict[str, Any]:
    """A plan as an agent needs it: each step with its task, its service and the alternatives (id, name, score,
    and whatever confidence fields the plan carries); with detail "full" everything (cost, the candidates' scoring
    signals, the SAD report)."""
    full = plan.model_dump(mode="json", exclude_none=True)
    if detail == "full":
        return full
    scoring = {"rank", "retrieval_score", "similarity", "compatibility", "signals", "rival_cosine"}

    def candidate_brief(candidate: dict[str, Any]) -> dict[str, Any]:
        # "named" only where true: the rare case worth the characters
        return {key: value for key, value in candidate.items()
                if key not in scoring and (key != "named" or value)}

    steps = []
    for step in full["steps"]:
        brief = {key: value for key, value in step.items() if key not in ("query", "choice", "alternatives")}
        if step.get("choice"):
            brief["choice"] = candidate_brief(step["choice"])
        brief["alternatives"] = [candidate_brief(candidate) for candidate in step.get("alternatives", [])]
        steps.append(brief)
    kept = ("request", "decomposer", "method", "groups", "services", "notes", "error")
    return {key: full[key] for key in kept if key in full} | {"steps": steps}
