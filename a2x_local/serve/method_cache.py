"""The search methods one server holds: each built once per registry snapshot it fits, a build in flight shared.

A method is kept while it fits the snapshot a request reads (a retrieval method while the services are unchanged, a
tree method while the tree is too). Otherwise one build runs for the snapshot on the cache's one background thread,
and every request that asks meanwhile gets that build's future, with the previous method (if any) to answer from
while it runs. When the method cannot be built for a snapshot, the failure is remembered for that registry identity
(not retried until it changes), the previous method keeps serving and ``problems`` says why. A replaced method is not
closed: a request in flight finishes with the method it started with.

What building a method takes (the settings, the engine, the database file) is the caller's: the cache is handed a
``make(name, progress)`` and only decides when it runs.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from a2x_local.errors import A2XError, DatabaseBusyError
from a2x_local.search import ProgressFactory, SearchMethod
from a2x_local.serve.errors import Unavailable
from a2x_local.serve.progress import Loading
from a2x_local.serve.snapshot import Identity, Snapshot

log = logging.getLogger("a2x_local.serve")
# make(name, progress) -> the method built over the database as it is now (an `A2XError` when it cannot be).
MakeMethod = Callable[[str, ProgressFactory], SearchMethod]


@dataclass(frozen=True)
class _Built:
    """A method and the registry identity it was built for (``tree`` None: it does not use the tree)."""

    method: SearchMethod
    fingerprint: str
    tree: int | None

    def fits(self, snapshot: Snapshot) -> bool:
        return self.fingerprint == snapshot.fingerprint and (self.tree is None or self.tree == snapshot.build_id)


class MethodCache:
    """Built methods by name, safe to use from the event loop and from worker threads. ``loading`` hears each
    build ("loading the NAME method", then its progress)."""

    def __init__(self, make: MakeMethod, loading: Loading) -> None:
        self._make = make
        self._loading = loading
        self._methods: dict[str, _Built] = {}
        self._failed: dict[str, tuple[Identity, Unavailable]] = {}  # method -> identity it failed on, why
        self.problems: dict[str, str] = {}   # method -> why its previous one still serves
        self._lock = threading.Lock()        # guards ``_building``
        # Builds run one at a time, on one thread. They hold no lock of the server's: a build that embeds for a
        # minute must not stop a reload, or a removed service would be served until it ends; their connections are
        # serialised with the reload's by `db.held_in_process`.
        self._serial = threading.RLock()
        self._builder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="a2x-build")
        self._building: dict[str, tuple[Identity, Future[SearchMethod], float]] = {}

    def cached(self, name: str, snapshot: Snapshot) -> SearchMethod | None:
        """The method built for this snapshot (or one it fits), None when there is none."""
        built = self._methods.get(name)
        return built.method if built is not None and built.fits(snapshot) else None

    def lookup(self, name: str, snapshot: Snapshot) -> tuple[SearchMethod | None, Future[SearchMethod] | None, float]:
        """(the method that fits the snapshot, None, 0), or (the previous one or None, the build now running for
        this snapshot, the seconds it has run). A build that failed for this registry identity is not retried until
        it changes: the previous method serves, or its error is raised."""
        found = self.cached(name, snapshot)
        if found is not None:
            return found, None, 0.0
        previous = self._methods.get(name)
        failed = self._failed.get(name)
        if failed is not None and failed[0] == snapshot.identity:
            if previous is not None:
                return previous.method, None, 0.0
            raise failed[1]
        with self._lock:
            running = self._building.get(name)
            if running is None or running[0] != snapshot.identity:
                running = (snapshot.identity, self._builder.submit(self.build, name, snapshot), time.monotonic())
                self._building[name] = running
        return (previous.method if previous is not None else None), running[1], time.monotonic() - running[2]

    def get(self, name: str, snapshot: Snapshot) -> SearchMethod:
        """The method for this snapshot, built here and now when needed (blocking: for worker threads)."""
        found = self.cached(name, snapshot)
        return found if found is not None else self.build(name, snapshot)

    def build(self, name: str, snapshot: Snapshot) -> SearchMethod:
        """Build the method for this snapshot (the cached one when it already fits). When it cannot be built, the
        previous one keeps serving (the reason kept in ``problems``) and the failure is remembered."""
        key = f"method:{name}"
        with self._serial:
            found = self.cached(name, snapshot)
            if found is not None:
                return found
            previous = self._methods.get(name)
            meanwhile = " (the previous one serves meanwhile)" if previous is not None else ""
            # "loading" until the method reports building something (embedding the services): the indexes of a
            # registry indexed beforehand are only read, and a client told "indexing" would think otherwise.
            self._loading.begin(key, f"loading the {name} method{meanwhile}")
            try:
                method = self._make(name, self._loading.progress_factory(
                    key, building=f"indexing for the {name} method{meanwhile}"))
            except DatabaseBusyError as exc:  # passing: try again on a later request
                if previous is not None:
                    return previous.method
                raise Unavailable(exc.message, hint="try again in a moment", code="DatabaseBusy") from exc
            except A2XError as exc:
                error = Unavailable(f"method '{name}' cannot run on this registry: {exc.message}", hint=exc.hint,
                                    code=exc.code)
                self._failed[name] = (snapshot.identity, error)
                if previous is None:
                    raise error from exc
                self.problems[name] = exc.message
                log.warning("method %s keeps serving its previous snapshot: %s", name, exc.message)
                return previous.method
            finally:
                self._loading.end(key)
            tree = method.describe().get("tree")
            self._methods[name] = _Built(method, snapshot.fingerprint, tree)
            self.problems.pop(name, None)
            self._failed.pop(name, None)
            return method

    def preload(self, name: str, snapshot: Snapshot) -> None:
        """Build the method now and have it pay its first-run costs (`SearchMethod.warm_up`: a retriever's first
        query), so the first client's search does not."""
        method = self.build(name, snapshot)
        try:
            method.warm_up()
        except Exception as exc:  # only a cost moved: the client's first search then pays it, or says what fails
            log.info("%s: warm-up query failed: %s: %s", method.name, type(exc).__name__, exc)

    def close(self) -> None:
        """Stop building: builds not started are cancelled, the one running ends on its own."""
        self._builder.shutdown(wait=False, cancel_futures=True)
