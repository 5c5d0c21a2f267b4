"""Plans for compositional requests (the compose stage) as a server operation: `POST /v1/compose` and the MCP tool
`compose_plan`.

A composer is opened per registry snapshot and step method, on a worker thread, and kept while the snapshot
lasts, so a plan is made against the same registry and tree as the searches answered beside it. It uses the
server's one engine (behind the shared rounds, so its decomposition and step searches share engine rounds with
concurrent searches) and never starts another: without a model the rule decomposer splits requests.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from a2x_local.compose import Plan, open_composer
from a2x_local.serve.discovery import Discovery, counted
from a2x_local.serve.errors import BadRequest, ModelCallFailed, TimedOut
from a2x_local.serve.snapshot import Snapshot


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
            if query.method == "compose":
                raise BadRequest("compose cannot search its own steps with compose", code="UnknownMethod",
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

    async def plan(self, query: ComposeQuery) -> Plan:
        """One plan, made on a worker thread within the server's time-out."""
        self.check(query)
        snapshot = await self.discovery.snapshot()
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
