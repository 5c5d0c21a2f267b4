"""The operations the server offers, whichever way a client comes in (HTTP API, MCP tools, browser page).

Each checks the request against the `[serve]` limits, takes the current snapshot (reloading it when the registry
or its tree changed), and answers from it; searches go through the batcher. Transports only translate.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from a2x_local.errors import A2XError
from a2x_local.search import SearchRequest, method_names, method_spec
from a2x_local.serve.batching import SearchBatcher
from a2x_local.serve.errors import BadRequest, ModelCallFailed, NotFound, TimedOut, Unavailable
from a2x_local.serve.snapshot import Snapshot
from a2x_local.serve.state import ServerState
from a2x_local.serve.views import (
    Health,
    MethodInfo,
    NodeView,
    SearchQuery,
    SearchResult,
    ServiceView,
    TreeView,
    category_ref,
    node_view,
    search_result,
)
from a2x_local.taxonomy import Tree
from a2x_local.text import check_text, printable

if TYPE_CHECKING:
    from a2x_local.serve.metrics import Metrics

log = logging.getLogger("a2x_local.serve")
T = TypeVar("T")


@contextmanager
def counted(metrics: Metrics, name: str, *, failure: str, code: str) -> Iterator[None]:
    """Counts one search or plan by outcome (ok, timeout, error) under ``name``; an unexpected exception becomes a
    502 naming only its type (the traceback goes to the server's log, never to the client)."""
    try:
        yield
    except TimedOut:
        metrics.searches.labels(name, "timeout").inc()
        raise
    except A2XError:
        metrics.searches.labels(name, "error").inc()
        raise
    except Exception as exc:
        metrics.searches.labels(name, "error").inc()
        log.error("%s: %s", name, failure, exc_info=exc)
        raise ModelCallFailed(f"{failure}: {type(exc).__name__}", hint="see the server's log", code=code) from exc
    metrics.searches.labels(name, "ok").inc()


class Discovery:
    """Search, browse and look up services, within the server's limits."""

    def __init__(self, state: ServerState, batcher: SearchBatcher, metrics: Metrics) -> None:
        self.state = state
        self.config = state.config
        self.batcher = batcher
        self.metrics = metrics

    async def _blocking(self, work: Callable[[], T]) -> T:
        """Database reads and method builds happen on a worker thread, never on the event loop."""
        return await asyncio.get_running_loop().run_in_executor(None, work)

    async def snapshot(self) -> Snapshot:
        if self.state.is_current():
            return self.state.snapshot
        return await self._blocking(self.state.current)

    # --- search ---------------------------------------------------------------------------------------------------

    def check_limits(self, text: str, k: int | None, *, what: str = "query",
                     example: str = "'convert currencies'") -> None:
        """A request's text and k within the server's limits (400 otherwise): searches and plans alike. The text is
        valid Unicode without control characters (`check_text`: 400 BadText naming the field)."""
        check_text(text, what, error=BadRequest)
        if not text.strip():
            raise BadRequest(f"the {what} is empty", hint=f"say what the agent needs, e.g. {example}",
                             code="EmptyQuery")
        if len(text) > self.config.max_query_chars:
            raise BadRequest(f"the {what} has {len(text):,} characters; this server accepts at most "
                             f"{self.config.max_query_chars:,}", hint="shorten it to what the agent needs",
                             code="QueryTooLong")
        if k is not None and not 1 <= k <= self.config.max_k:
            raise BadRequest(f"k must be between 1 and {self.config.max_k}", code="BadK",
                             hint=f"ask for 1 to {self.config.max_k} results ([serve] max_k sets the most)")

    def check(self, query: SearchQuery) -> tuple[str, str | None]:
        """The method and mode the query will run with; anything outside the limits is refused (400)."""
        self.check_limits(query.query, query.k)
        name = query.method or self.config.default_method
        self.state.check_method(name)
        method_spec(name).check_mode(query.mode)    # a ModeError: 400 BadMode
        return name, query.mode

    async def search(self, query: SearchQuery) -> SearchResult:
        """One search, batched with whatever else is in flight for the same method."""
        name, mode = self.check(query)
        snapshot = await self.snapshot()
        method = self.state.cached_method(name, snapshot)
        if method is None:
            method = await self._blocking(lambda: self.state.method(name, snapshot))
        request = SearchRequest(query.query.strip(), k=query.k, mode=mode)
        with counted(self.metrics, name, failure="the search failed", code="SearchFailed"):
            llm = self.state.uses_engine(name)
            concurrency = self.config.llm_batch_concurrency if llm else self.config.retrieval_batch_concurrency
            scope = self.state.participant if llm else None
            answer = await self.batcher.search(method, request, self.config.request_timeout_s, concurrency, scope)
            if answer.error:
                raise ModelCallFailed(f"the model calls of this search failed: {answer.error}",
                                      hint="try again; if it persists, check the model (a2x-local models check)",
                                      code="ModelCallFailed")
        return search_result(name, mode, answer, snapshot.services, chars=self.config.summary_chars,
                             trace=query.trace)

    async def search_many(self, queries: list[SearchQuery]) -> list[SearchResult]:
        """Several searches in one call (bounded); one that fails its checks or its search is an error in its own
        slot, and the others are answered."""
        if not queries:
            raise BadRequest("no searches given", hint='send {"requests": [{"query": "..."}]}', code="EmptyBatch")
        if len(queries) > self.config.max_requests_per_call:
            raise BadRequest(f"{len(queries)} searches in one call; this server accepts at most "
                             f"{self.config.max_requests_per_call}", hint="split them over several calls",
                             code="BatchTooLarge")
        refused: dict[int, A2XError] = {}
        for index, query in enumerate(queries):
            try:
                self.check(query)
            except A2XError as exc:   # a bad request is an error in its own slot: the others still run
                refused[index] = exc
        outcomes = await asyncio.gather(*(self._refused(refused[index]) if index in refused else self.search(query)
                                          for index, query in enumerate(queries)), return_exceptions=True)
        results = []
        for index, (query, outcome) in enumerate(zip(queries, outcomes, strict=True)):
            if isinstance(outcome, BaseException):
                if not isinstance(outcome, Exception):
                    raise outcome
                # One search failing leaves the others' answers standing: its own result carries the error.
                message = outcome.message if isinstance(outcome, A2XError) else "the search failed"
                if index in refused:
                    message = f"requests[{index}]: {message}"
                name = query.method or self.config.default_method
                outcome = SearchResult(method=name, mode=query.mode, query=printable(query.query), hits=[],
                                       ranked=False, error=message)
            results.append(outcome)
        return results

    @staticmethod
    async def _refused(error: A2XError) -> SearchResult:
        raise error

    def methods(self) -> list[MethodInfo]:
        """Every method, with its declared facts and whether this server can run it."""
        infos = []
        for name in method_names():
            spec = method_spec(name)
            infos.append(MethodInfo(name=name, summary=spec.summary, llm=spec.needs_engine, engine=spec.engine,
                                    available=self.state.can_run(spec), modes=list(spec.modes), cost=spec.cost,
                                    cost_note=spec.cost_note, default=name == self.config.default_method))
        return infos

    # --- the tree and the services --------------------------------------------------------------------------------

    def _tree(self, snapshot: Snapshot) -> Tree:
        if snapshot.tree is None:
            raise NotFound("this registry has no active tree", code="NoTree",
                           hint="build one (a2x-local build --model ALIAS) or import one (a2x-local tree import FILE)")
        return snapshot.tree

    async def node(self, node_id: str) -> NodeView:
        snapshot = await self.snapshot()
        tree = self._tree(snapshot)
        if node_id not in tree.nodes:
            raise NotFound(f"tree {tree.build_id} has no category '{node_id}'",
                           hint="start at the root ('root') and follow the children's ids", code="NoSuchCategory")
        return node_view(tree, node_id, snapshot.services, chars=self.config.summary_chars,
                         max_services=self.config.max_node_services)

    async def tree(self) -> TreeView:
        snapshot = await self.snapshot()
        tree = self._tree(snapshot)
        root = node_view(tree, tree.root_id, snapshot.services, chars=self.config.summary_chars,
                         max_services=self.config.max_node_services)
        return TreeView(build_id=tree.build_id, registry_fingerprint=tree.registry_fingerprint,
                        stale=snapshot.tree_is_stale, stats=tree.stats().to_dict(), root=root)

    async def service(self, service_id: str) -> ServiceView:
        snapshot = await self.snapshot()
        service = snapshot.services.get(service_id)
        if service is None:
            raise NotFound(f"no service with id '{service_id}'", code="NoSuchService",
                           hint="search first; the hits carry the ids")
        categories = []
        if snapshot.tree is not None:
            tree = snapshot.tree
            for node_id in snapshot.placements.get(service_id, []):
                categories.append([category_ref(tree, tree.node(n), self.config.summary_chars)
                                   for n in tree.path(node_id)[1:]])
        return ServiceView(**service.to_dict(), categories=categories)

    async def health(self) -> Health:
        try:
            snapshot = await self.snapshot()
        except A2XError as exc:
            raise Unavailable(exc.message, hint=exc.hint) from exc
        engine = self.state.engine.describe() if self.state.engine is not None else None
        problems = dict(self.state.problems)
        degraded = self.state.degraded
        if degraded is not None:    # serving the snapshot it holds, though the file under it cannot be read
            problems["registry"] = degraded
        return Health(status="ok" if degraded is None else "degraded", services=len(snapshot.services),
                      tree=snapshot.build_id, tree_stale=snapshot.tree_is_stale, generation=snapshot.generation,
                      engine=engine, methods=[info.name for info in self.methods() if info.available],
                      problems=problems)

    def state_numbers(self) -> dict[str, Any]:
        """For the metrics: what the served snapshot holds (nothing is read from the database)."""
        snapshot = self.state.latest
        if snapshot is None:
            return {}
        return {"services": len(snapshot.services), "build_id": snapshot.build_id,
                "generation": snapshot.generation}
