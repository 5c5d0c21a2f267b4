"""The operations the server offers, whichever way a client comes in (HTTP API, MCP tools, browser page).

Each checks the request against the `[serve]` limits, takes the current snapshot (reloading it when the registry
or its tree changed), and answers from it; searches go through the batcher. What is not ready yet (the registry at
start, the model, a method's first index) is waited for up to `loading_wait_s`, with progress reported to clients
that asked for it, and then answered "Loading". Every list is one page (`limit`, `cursor` -> `next_cursor`), and
searches and listings keep only the services of a type or source when asked. Transports only translate.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from a2x_local.compose import COMPOSE_SPEC
from a2x_local.errors import A2XError
from a2x_local.registry import SERVICE_TYPES, Service
from a2x_local.search import Hit, SearchAnswer, SearchMethod, SearchRequest, method_names, method_spec
from a2x_local.serve.access import may_see, shown
from a2x_local.serve.batching import SearchBatcher
from a2x_local.serve.errors import BadRequest, ModelCallFailed, NotFound, TimedOut, Unavailable
from a2x_local.serve.paging import Page, scope_of
from a2x_local.serve.progress import Activity, Report, with_progress
from a2x_local.serve.snapshot import Snapshot
from a2x_local.serve.state import ServerState
from a2x_local.serve.views import (
    Filters,
    Health,
    HitView,
    MethodInfo,
    NodeView,
    SearchQuery,
    SearchResult,
    ServiceList,
    ServiceView,
    TreeView,
    hit_view,
    node_view,
    placement_path,
    search_result,
    service_ref,
)
from a2x_local.taxonomy import Tree
from a2x_local.text import check_text, printable

if TYPE_CHECKING:
    from a2x_local.serve.metrics import Metrics

log = logging.getLogger("a2x_local.serve")
T = TypeVar("T")
POLL_S = 0.05
SET_ANSWERS_KEPT = 256     # answers of unranked (LLM) methods kept, so their next pages cost nothing


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


def keeps(service: Service, filters: Filters) -> bool:
    """The service passes the filters, and the caller's profile may see it (a gateway's `see` / `deny`)."""
    return ((filters.type is None or service.type == filters.type)
            and (filters.source is None or filters.source in (service.source or "")) and may_see(service.id))


class Discovery:
    """Search, browse, list and look up services, within the server's limits."""

    def __init__(self, state: ServerState, batcher: SearchBatcher, metrics: Metrics) -> None:
        self.state = state
        self.config = state.config
        self.batcher = batcher
        self.metrics = metrics
        self._set_answers: OrderedDict[tuple[int, str | None, str],
                                       tuple[weakref.ref[SearchMethod], SearchAnswer]] = OrderedDict()
        self._types: tuple[int, dict[str, int]] = (-1, {})

    async def _blocking(self, work: Callable[[], T]) -> T:
        """Database reads and method builds happen on a worker thread, never on the event loop."""
        return await asyncio.get_running_loop().run_in_executor(None, work)

    # --- waiting for what is still loading ------------------------------------------------------------------------

    async def wait_for(self, ready: Callable[[], bool], activity: Activity, stage: str, key: str,
                    limit_s: float | None = None) -> None:
        """Return once ``ready()``; after ``limit_s`` (default `loading_wait_s`) answer "Loading" with what is
        loading. ``key`` names the `loading` entry whose progress the client hears meanwhile."""
        if ready():
            return
        # The loading entry says what it is and how far it got; the stage names it only while it has no entry.
        activity.set(stage, lambda: self.state.loading.describe(key))
        deadline = time.monotonic() + (self.config.loading_wait_s if limit_s is None else limit_s)
        while not ready():
            if time.monotonic() >= deadline:
                progress = self.state.loading.describe(key)
                raise Unavailable(f"the server is still {progress or stage}",
                                  code="Loading", hint="try again in a moment; GET /healthz shows the progress")
            await asyncio.sleep(POLL_S)

    async def snapshot(self, activity: Activity | None = None) -> Snapshot:
        if not self.state.snapshot_ready():
            await self.wait_for(self.state.snapshot_ready, activity or Activity(), "reading the registry", "registry")
        if self.state.is_current():
            return self.state.snapshot
        return await self._blocking(self.state.current)

    async def method(self, name: str, snapshot: Snapshot, activity: Activity) -> SearchMethod:
        """The method for this snapshot: cached; else the one being built (waited for, within limits); else the
        previous one while the new one is built in the background."""
        if self.state.uses_engine(name):
            await self.wait_for(self.state.engine_ready, activity, "loading the model", "model")
            if self.state.engine_error is not None and method_spec(name).needs_engine:
                raise self.state.engine_error
        method, building, running_s = self.state.methods.lookup(name, snapshot)
        if building is None:
            assert method is not None
            return method
        # A first build is waited for; a rebuild only briefly, once: after that the previous method answers.
        limit = self.config.loading_wait_s if method is None else max(0.0, self.config.rebuild_wait_s - running_s)
        try:
            await self.wait_for(building.done, activity, f"loading the {name} method", f"method:{name}", limit)
        except Unavailable:
            if method is not None:          # the previous one answers while the new one is built
                return method
            raise
        return await asyncio.wrap_future(building)

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

    def check_filters(self, filters: Filters) -> None:
        if filters.type is not None and filters.type not in SERVICE_TYPES:
            raise BadRequest(f"unknown service type '{filters.type}'", code="BadType",
                             hint=f"choose one of: {', '.join(SERVICE_TYPES)}")

    def check_limit(self, limit: int | None) -> int:
        if limit is None:
            return self.config.page_size
        if not 1 <= limit <= self.config.max_page:
            raise BadRequest(f"limit must be between 1 and {self.config.max_page}", code="BadLimit",
                             hint="page through longer lists with next_cursor")
        return limit

    def check(self, query: SearchQuery) -> tuple[str, str | None]:
        """The method and mode the query will run with; anything outside the limits is refused (400)."""
        self.check_limits(query.query, query.k)
        self.check_filters(query)
        name = query.method or self.config.default_method
        self.state.check_method(name)
        method_spec(name).check_mode(query.mode)    # a ModeError: 400 BadMode
        return name, query.mode

    async def search(self, query: SearchQuery, report: Report | None = None) -> SearchResult:
        """One search (a page of it), batched with whatever else is in flight for the same method."""
        activity = Activity()
        return await with_progress(self._search(query, activity), report, activity)

    async def _search(self, query: SearchQuery, activity: Activity) -> SearchResult:
        name, mode = self.check(query)
        snapshot = await self.snapshot(activity)
        self.state.check_method(name)               # now that the registry is known (a tree method, no tree)
        text = query.query.strip()
        page = Page.of(query.cursor, query.k or self.config.default_k,
                       scope_of("search", snapshot.identity, name, mode, text, query.type, query.source))
        method = await self.method(name, snapshot, activity)
        activity.set(f"searching with {name}")
        with counted(self.metrics, name, failure="the search failed", code="SearchFailed"):
            if method.ranked:
                answer, kept, more = await self._ranked(name, method, text, mode, page, snapshot, query)
            else:
                answer = await self._set_answer(name, method, text, mode)
                kept = self._kept(answer.hits, snapshot, query)
                more = len(kept) > page.end
        hits = [self._hit_view(hit, snapshot) for hit in kept[page.offset:page.end]]
        return search_result(name, mode, answer, hits, detail=query.detail,
                             next_cursor=page.next_cursor(page.end + 1) if more else None)

    async def _answer(self, name: str, method: SearchMethod, request: SearchRequest) -> SearchAnswer:
        llm = self.state.uses_engine(name)
        concurrency = self.config.llm_batch_concurrency if llm else self.config.retrieval_batch_concurrency
        scope = self.state.participant if llm else None
        answer = await self.batcher.search(method, request, self.config.request_timeout_s, concurrency, scope)
        if answer.error:
            raise ModelCallFailed(f"the model calls of this search failed: {answer.error}",
                                  hint="try again; if it persists, check the model (a2x-local models check)",
                                  code="ModelCallFailed")
        return answer

    async def _ranked(self, name: str, method: SearchMethod, text: str, mode: str | None, page: Page,
                      snapshot: Snapshot, filters: Filters) -> tuple[SearchAnswer, list[Hit], bool]:
        """A ranked search deep enough for this page (and one more hit, to know whether a next page exists). With
        filters, it asks deeper until the page is full or the ranking is exhausted. Paging stops at max_k."""
        end = min(page.end, self.config.max_k)
        depth = end + 1
        while True:
            answer = await self._answer(name, method, SearchRequest(text, k=depth, mode=mode))
            kept = self._kept(answer.hits, snapshot, filters)
            if len(kept) > end or len(answer.hits) < depth or depth >= len(snapshot.services):
                return answer, kept[:end], len(kept) > end and end < self.config.max_k
            depth = min(len(snapshot.services), depth * 4)

    async def _set_answer(self, name: str, method: SearchMethod, text: str, mode: str | None) -> SearchAnswer:
        """An unranked method's whole answer (its pages are cut from it), kept a while for the next pages."""
        key = (id(method), mode, text)
        found = self._set_answers.get(key)
        if found is not None and found[0]() is method:   # the same method object (an id can be reused)
            self._set_answers.move_to_end(key)
            return found[1]
        answer = await self._answer(name, method, SearchRequest(text, mode=mode))
        try:
            self._set_answers[key] = (weakref.ref(method), answer)   # never keeps a replaced method alive
        except TypeError:
            return answer
        while len(self._set_answers) > SET_ANSWERS_KEPT:
            self._set_answers.popitem(last=False)
        return answer

    @staticmethod
    def _kept(hits: list[Hit], snapshot: Snapshot, filters: Filters) -> list[Hit]:
        """The hits of services this snapshot holds (a method serving from an older snapshot may name removed
        ones) that pass the filters."""
        return [hit for hit in hits
                if hit.service_id in snapshot.services and keeps(snapshot.services[hit.service_id], filters)]

    def _hit_view(self, hit: Hit, snapshot: Snapshot) -> HitView:
        path = list(hit.path)
        if not path and snapshot.tree is not None:
            placed = snapshot.placements.get(hit.service_id)
            path = snapshot.tree.path(placed[0]) if placed else []
        return hit_view(shown(snapshot.services[hit.service_id]), hit.score, path, snapshot.tree,
                        self.config.summary_chars)

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
        """Every method, with its declared facts and whether this server can run it now (and if not, why)."""
        infos = []
        for name in method_names():
            spec = method_spec(name)
            why = self.state.missing(spec)
            infos.append(MethodInfo(name=name, summary=spec.summary, llm=spec.needs_engine, engine=spec.engine,
                                    tree=spec.tree, use="plan" if name == COMPOSE_SPEC.name else "search",
                                    available=why is None,
                                    reason=f"{why.message}; {why.hint}" if why is not None else None,
                                    modes=list(spec.modes), cost=spec.cost, cost_note=spec.cost_note,
                                    default=name == self.config.default_method))
        return infos

    # --- the tree and the services --------------------------------------------------------------------------------

    def _tree(self, snapshot: Snapshot) -> Tree:
        if snapshot.tree is None:
            raise NotFound("this registry has no active tree", code="NoTree",
                           hint="build one (a2x-local build --model ALIAS) or import one (a2x-local tree import "
                                "FILE); GET /v1/services (MCP list_services) lists the services meanwhile")
        return snapshot.tree

    def _node_page(self, snapshot: Snapshot, node_id: str, limit: int | None, cursor: str | None) -> NodeView:
        tree = self._tree(snapshot)
        if node_id not in tree.nodes:
            raise NotFound(f"tree {tree.build_id} has no category '{node_id[:200]}'",
                           hint="start at the root ('root') and follow the children's ids", code="NoSuchCategory")
        page = Page.of(cursor, self.check_limit(limit), scope_of("node", snapshot.identity, node_id))
        node = tree.node(node_id)
        children = tree.children(node_id)
        services = [snapshot.services[sid] for sid in node.services if sid in snapshot.services and may_see(sid)]
        more = max(len(children), len(services))
        return node_view(tree, node_id, snapshot.services, chars=self.config.summary_chars,
                         children=(children[page.offset:page.end], len(children)),
                         listed=(services[page.offset:page.end], len(services)), next_cursor=page.next_cursor(more))

    async def node(self, node_id: str, limit: int | None = None, cursor: str | None = None) -> NodeView:
        snapshot = await self.snapshot()
        return self._node_page(snapshot, node_id, limit, cursor)

    async def tree(self, limit: int | None = None, cursor: str | None = None) -> TreeView:
        snapshot = await self.snapshot()
        tree = self._tree(snapshot)
        return TreeView(build_id=tree.build_id, registry_fingerprint=tree.registry_fingerprint,
                        stale=snapshot.tree_is_stale, stats=tree.stats().to_dict(),
                        root=self._node_page(snapshot, tree.root_id, limit, cursor))

    async def services(self, filters: Filters, limit: int | None = None, cursor: str | None = None) -> ServiceList:
        """One page of the registry's services, in id order, of a type or source when asked."""
        self.check_filters(filters)
        size = self.check_limit(limit)
        snapshot = await self.snapshot()
        page = Page.of(cursor, size, scope_of("services", snapshot.identity, filters.type, filters.source))
        kept = sorted((s for s in snapshot.services.values() if keeps(s, filters)), key=lambda s: s.id)
        listed, next_cursor = page.slice(kept)
        return ServiceList(total=len(kept), services=[service_ref(s, self.config.summary_chars) for s in listed],
                           next_cursor=next_cursor)

    async def service(self, service_id: str) -> ServiceView:
        if not service_id:
            raise NotFound("no service id given", code="NoSuchService",
                           hint="GET /v1/services lists the services; search first, the hits carry the ids")
        snapshot = await self.snapshot()
        service = snapshot.services.get(service_id)
        if service is None or not may_see(service_id):   # hidden from this caller: as if it were not there
            raise NotFound(f"no service with id '{service_id[:200]}'", code="NoSuchService",
                           hint="search first; the hits carry the ids")
        service = shown(service)
        categories = []
        if snapshot.tree is not None:
            for node_id in snapshot.placements.get(service_id, []):
                categories.append(placement_path(snapshot.tree, node_id, self.config.summary_chars))
        return ServiceView(**service.to_dict(), categories=categories)

    def limits(self) -> dict[str, int]:
        """What a client may ask for (the page takes its bounds from here)."""
        config = self.config
        return {"max_k": config.max_k, "default_k": config.default_k, "max_query_chars": config.max_query_chars,
                "page_size": config.page_size, "max_page": config.max_page,
                "max_requests_per_call": config.max_requests_per_call}

    async def health(self) -> Health:
        """Liveness: answered at once, while loading too (never waits for the registry or the model)."""
        state = self.state
        snapshot = state.latest
        if snapshot is not None and not state.is_current():
            try:
                snapshot = await self.snapshot()
            except A2XError as exc:
                raise Unavailable(exc.message, hint=exc.hint) from exc
        problems = dict(state.problems)
        if state.engine_error is not None:
            problems["model"] = state.engine_error.message
        if state.load_error is not None:
            problems["registry"] = state.load_error.message
        if state.degraded is not None:   # serving the snapshot it holds, though the file under it cannot be read
            problems["registry"] = state.degraded
        status = ("failed" if state.load_error is not None else "degraded" if state.degraded is not None
                  else "ok" if state.ready() else "loading")
        engine = state.engine.describe() if state.engine is not None else None
        return Health(status=status, services=len(snapshot.services) if snapshot is not None else None,
                      tree=snapshot.build_id if snapshot is not None else None,
                      tree_stale=snapshot.tree_is_stale if snapshot is not None else False,
                      generation=snapshot.generation if snapshot is not None else 0, engine=engine,
                      methods=[info.name for info in self.methods() if info.available], problems=problems,
                      loading=state.loading.to_dict(), types=self._type_counts(snapshot), limits=self.limits())

    def _type_counts(self, snapshot: Snapshot | None) -> dict[str, int]:
        """Services per type (counted once per snapshot: /healthz is asked often)."""
        if snapshot is None:
            return {}
        if self._types[0] != snapshot.generation:
            types: dict[str, int] = {}
            for service in snapshot.services.values():
                types[service.type] = types.get(service.type, 0) + 1
            self._types = (snapshot.generation, dict(sorted(types.items())))
        return self._types[1]

    def state_numbers(self) -> dict[str, Any]:
        """For the metrics: what the served snapshot holds (nothing is read from the database)."""
        snapshot = self.state.latest
        if snapshot is None:
            return {}
        return {"services": len(snapshot.services), "build_id": snapshot.build_id,
                "generation": snapshot.generation}
