"""What one server process holds: the registry snapshot, the search methods built over it, and one engine.

Fast start: nothing slow happens before the server answers. `start` only checks the database file; `start_loading`
then reads the first snapshot, starts the model (when one was asked for) and builds the preloaded methods on
background threads, and `loading` says what is still being prepared. Requests that need something not ready yet
wait for it (their clients hear progress) up to `[serve] loading_wait_s`, then get a "Loading" answer. On indexes
built beforehand, a preloaded hybrid method is ready about a second after the loading starts: its indexes are
read, and its queries are encoded without torch (`Embedder.query_model`), whose import alone took 5-12 s.

Hot tree switch: every request starts by asking for the current snapshot. That costs one `stat` of the database
file; only when the file changed is the registry's identity (fingerprint, active tree id) read, and only when that
changed is a new snapshot read. Methods are built per snapshot on a background thread (a retrieval method is kept
while the services are unchanged, a tree method while the tree is too). A request waits up to
`[serve] rebuild_wait_s` for the new one and otherwise answers with the previous one while the build goes on, so a
one-row sync never stalls searches behind an index rebuild; a request in flight finishes with the method and tree
it started with. When a method cannot be built for a new snapshot, the previous one keeps serving and /healthz
says why. The methods are held by a `MethodCache` (`method_cache.py`); this module says how one is built here (the
server's settings, database file and engine).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

import duckdb

from a2x_local.compose import step_method_names
from a2x_local.db import connect
from a2x_local.errors import A2XError, DatabaseBusyError
from a2x_local.llm import Engine
from a2x_local.search import (
    MethodSpec,
    ProgressFactory,
    SearchMethod,
    make_method,
    method_names,
    method_options,
    method_spec,
)
from a2x_local.serve.config import ServeConfig
from a2x_local.serve.errors import BadRequest, Unavailable
from a2x_local.serve.method_cache import MethodCache
from a2x_local.serve.progress import Loading
from a2x_local.serve.rounds import SharedRounds
from a2x_local.serve.snapshot import (
    FileStamp,
    Snapshot,
    read_identity,
    read_only,
    read_snapshot,
    unreadable,
)
from a2x_local.settings import Settings

log = logging.getLogger("a2x_local.serve")
EngineSource = Callable[[], Engine]


class ServerState:
    """The snapshot, the methods and the engine; safe to use from the event loop and from worker threads.

    ``engine_source`` makes the one engine (on a background thread); ``wrap_engine`` puts it behind the shared
    rounds. Without a source the server runs retrieval methods (and compose's rule decomposer) only.
    """

    def __init__(self, settings: Settings, config: ServeConfig, engine_source: EngineSource | None = None,
                 wrap_engine: Callable[[Engine], SharedRounds] | None = None) -> None:
        self.settings = settings
        self.config = config
        self.db_path = Path(settings.db_path)
        self.engine: SharedRounds | None = None
        self.engine_expected = engine_source is not None
        self.engine_error: A2XError | None = None
        self.load_error: A2XError | None = None
        self.loading = Loading()
        self.answered = threading.Event()   # set once the server has answered its first HTTP request
        self._engine_source = engine_source
        self._wrap_engine = wrap_engine
        self._engine_ready = threading.Event()
        self._snapshot_ready = threading.Event()
        self._started = False
        self._closing = False
        # The server's own database reads (the snapshot, a reload, the composer's opening) go through this lock, one
        # at a time; every connection of the process, method builds' too, is also serialised per file by
        # `db.held_in_process` (DuckDB refuses a read-only and a read-write connection to one file in one process).
        self._lock = threading.RLock()
        self._start_lock = threading.Lock()
        self._runtime_settings = settings.with_overrides("registry", lock_timeout_s=config.reload_lock_wait_s)
        self._snapshot: Snapshot | None = None
        self._stamp: FileStamp | None = None
        # Built on its own thread, holding no lock of this state's (a build that embeds for a minute must not stop a
        # reload).
        self.methods = MethodCache(self._make_method, self.loading)
        self.degraded: str | None = None   # why the file under the server cannot be read now (None: it can)

    # --- starting ------------------------------------------------------------------------------------------------

    def start(self) -> None:
        """What must hold before the server listens (seconds at most): the database file is there and readable
        by this version (an older file is brought to this version's schema, as every command does)."""
        if not self.db_path.is_file():
            raise Unavailable(f"{self.db_path}: no registry database here",
                              hint="load services first: a2x-local ingest PATH --db FILE")
        with self._lock, connect(self.db_path, lock_timeout_s=self.settings.lock_timeout_s):
            pass

    def start_loading(self) -> None:
        """Read the first snapshot, start the engine and build the preloaded methods, on background threads (once;
        later calls do nothing)."""
        with self._start_lock:
            if self._started:
                return
            self._started = True
        if self._engine_source is not None:
            self.loading.begin("model", "loading the model")
            threading.Thread(target=self._load_engine, name="a2x-engine", daemon=True).start()
        self.loading.begin("registry", "reading the registry")
        threading.Thread(target=self._load_registry, name="a2x-load", daemon=True).start()

    def _load_registry(self) -> None:
        try:
            stamp = FileStamp.of(self.db_path)
            with self._lock, read_only(self.db_path, wait_s=self.settings.lock_timeout_s) as con:
                self._snapshot = read_snapshot(con, generation=0)
            self._stamp = stamp
            log.info("registry read: %d services, tree %s", len(self._snapshot.services), self._snapshot.build_id)
        except A2XError as exc:
            self.load_error = exc
            log.error("the registry could not be read: %s", exc.message)
            return
        except Exception as exc:
            self.load_error = Unavailable(f"the registry could not be read: {type(exc).__name__}",
                                          hint="see the server's log", code="LoadFailed")
            log.error("the registry could not be read", exc_info=exc)
            return
        finally:
            if self._snapshot is not None and self.config.preload:
                self.loading.begin("preload", "loading the preloaded methods")
            self.loading.end("registry")
            self._snapshot_ready.set()
        try:
            self._preload(engine_methods=False)
            if self._engine_source is not None:
                self._engine_ready.wait()
                self._preload(engine_methods=True)
        finally:
            self.loading.end("preload")

    def _preload(self, *, engine_methods: bool) -> None:
        for name in self.config.preload:
            try:
                spec = method_spec(name)
                if (spec.takes_engine and self.engine_expected) != engine_methods:
                    continue
                if self.missing(spec) is None:
                    self.methods.preload(name, self.snapshot)
            except A2XError as exc:
                log.info("method %s not preloaded: %s", name, exc.message)

    def _load_engine(self) -> None:
        assert self._engine_source is not None
        try:
            engine = self._engine_source()
            if self._closing:
                engine.close()
                return
            self.engine = self._wrap_engine(engine) if self._wrap_engine is not None else SharedRounds(
                engine, window_s=0, max_prompts=self.config.engine_max_prompts)
            log.info("model ready: %s", self.engine.describe())
        except A2XError as exc:
            self.engine_error = Unavailable(f"the model could not be started: {exc.message}", hint=exc.hint,
                                            code="EngineFailed")
            log.error("the model could not be started: %s", exc.message)
        except Exception as exc:
            self.engine_error = Unavailable(f"the model could not be started: {type(exc).__name__}: {exc}"[:500],
                                            hint="see the server's log and `a2x-local models check`",
                                            code="EngineFailed")
            log.error("the model could not be started", exc_info=exc)
        finally:
            self.loading.end("model")
            self._engine_ready.set()

    def snapshot_ready(self) -> bool:
        return self._snapshot_ready.is_set()

    def engine_ready(self) -> bool:
        return self._engine_ready.is_set() or not self.engine_expected

    def ready(self) -> bool:
        """Everything preloaded: the snapshot read, the engine started, nothing being built."""
        return self.snapshot_ready() and self.engine_ready() and not self.loading

    def wait_ready(self, timeout_s: float) -> bool:
        """Block until `ready` (tests and benchmarks that want a warm server); False after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while not self.ready():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)
        return True

    # --- the snapshot -------------------------------------------------------------------------------------------

    @property
    def snapshot(self) -> Snapshot:
        if self.load_error is not None:
            raise self.load_error
        if self._snapshot is None:
            raise Unavailable("the server is still reading the registry", code="Loading",
                              hint="try again in a moment; GET /healthz shows what is loading")
        return self._snapshot

    @property
    def latest(self) -> Snapshot | None:
        """The snapshot held now, without looking at the database (None before the first is read)."""
        return self._snapshot

    def is_current(self) -> bool:
        """True when the database file is unchanged since the last check (one stat: fine on the event loop)."""
        return self._snapshot is not None and FileStamp.of(self.db_path) == self._stamp

    def current(self) -> Snapshot:
        """The snapshot to answer a new request from, reloaded first when the registry or its tree changed."""
        if self.is_current():
            return self.snapshot
        # Another reload holds the lock: keep serving the snapshot we have rather than wait for it (the next
        # request looks again).
        if not self._lock.acquire(timeout=self.config.reload_lock_wait_s):
            return self.snapshot
        try:
            stamp = FileStamp.of(self.db_path)
            if stamp == self._stamp:
                return self.snapshot
            try:
                with read_only(self.db_path, wait_s=self.config.reload_lock_wait_s) as con:
                    identity = read_identity(con)
                    if identity != self.snapshot.identity:
                        self._snapshot = read_snapshot(con, generation=self.snapshot.generation + 1)
                        log.info("registry reloaded: %d services, tree %s (generation %d)",
                                 len(self._snapshot.services), identity.build_id, self._snapshot.generation)
            except DatabaseBusyError:
                # A writer (the nightly job) holds the file: keep serving what we have, look again next request.
                return self.snapshot
            except A2XError as exc:
                # Damaged or replaced by another database: keep serving, say so once, look again when it changes.
                self._stamp = stamp
                self._degrade(exc.message)
                return self.snapshot
            self._stamp = stamp
            if self.degraded is not None:
                log.warning("registry readable again, degraded state over: %s", self.db_path)
                self.degraded = None
            return self.snapshot
        finally:
            self._lock.release()

    def _degrade(self, why: str) -> None:
        if why != self.degraded:
            log.warning("registry not reloaded, serving the previous snapshot (generation %d): %s",
                        self.snapshot.generation, why)
        self.degraded = why

    @property
    def runtime_settings(self) -> Settings:
        """The settings methods are built with: a short wait for a busy database, as a server needs."""
        return self._runtime_settings

    def database(self) -> threading.RLock:
        """Hold this around any other database access of this process (one connection at a time)."""
        return self._lock

    def own_write(self, write: Callable[[], None]) -> None:
        """Run ``write`` (the gateway's audit rows) under the database lock. When the file was current before it,
        its new stamp is taken as current too: the server's own rows change neither the services nor the tree, so
        they must not make the next request reload the registry."""
        with self._lock:
            current = self._stamp is not None and FileStamp.of(self.db_path) == self._stamp
            write()
            if current:
                self._stamp = FileStamp.of(self.db_path)

    # --- what can run ---------------------------------------------------------------------------------------------

    def missing(self, spec: MethodSpec, snapshot: Snapshot | None = None) -> Unavailable | None:
        """Why this server cannot run the method now (None: it can), with what would enable it. The facts come
        from the method's spec: its engine, whether it searches the active tree."""
        if spec.needs_engine and not self.engine_expected:
            return Unavailable(f"method '{spec.name}' needs a model, and this server runs without one",
                               hint="start the server with --model ALIAS (see `a2x-local models list`), or use one "
                                    f"of: {', '.join(self.offered())}", code="NoModel")
        if spec.needs_engine and self.engine_error is not None:
            return self.engine_error
        snapshot = snapshot or self._snapshot
        if spec.tree and snapshot is not None and snapshot.tree is None:
            return Unavailable(f"method '{spec.name}' searches the active tree, and this registry has none",
                               hint="build one (a2x-local build --model ALIAS) or import one (a2x-local tree import "
                                    f"FILE), or use one of: {', '.join(self.offered())}", code="NoTree")
        return None

    def uses_engine(self, name: str) -> bool:
        """Whether the method's searches run on this server's engine (they then join its shared rounds)."""
        return method_spec(name).takes_engine and self.engine_expected

    def offered(self, *, steps: bool = False) -> list[str]:
        """The methods this server can run now (``steps``: those that may search a compose plan's steps)."""
        names = step_method_names() if steps else method_names()
        return [name for name in names if self._runs(method_spec(name))]

    def _runs(self, spec: MethodSpec) -> bool:
        if spec.needs_engine and (not self.engine_expected or self.engine_error is not None):
            return False
        return not (spec.tree and self._snapshot is not None and self._snapshot.tree is None)

    def participant(self) -> AbstractContextManager[object]:
        """Work on the engine says so (the shared rounds then know who may still join a round); a no-op without."""
        return self.engine.participant() if self.engine is not None else nullcontext()

    def check_method(self, name: str, *, steps: bool = False) -> None:
        """Refuse unknown methods, and methods this server cannot run (no model, no tree), before anything is
        built; the hint lists only what this server can run (``steps``: as a compose step method)."""
        if name not in (step_method_names() if steps else method_names()):
            raise BadRequest(f"unknown search method '{name}'",
                             hint=f"choose one of: {', '.join(self.offered(steps=steps))}", code="UnknownMethod")
        why = self.missing(method_spec(name))
        if why is not None:
            raise why

    # --- the methods ---------------------------------------------------------------------------------------------

    @property
    def problems(self) -> dict[str, str]:
        """Methods whose previous build still serves, and why the new one could not be built."""
        return self.methods.problems

    def method(self, name: str, snapshot: Snapshot) -> SearchMethod:
        """The method for this snapshot, built here and now when needed (blocking: for worker threads)."""
        self.check_method(name)
        return self.methods.get(name, snapshot)

    def _make_method(self, name: str, progress: ProgressFactory) -> SearchMethod:
        """The method built here and now over the served file, with this server's engine (`MethodCache` decides
        when)."""
        options = method_options(name, self._engine_options(method_spec(name)))
        try:
            return make_method(name, self._runtime_settings, self.db_path, options=options, progress=progress)
        except duckdb.Error as exc:   # the file under the server failed while the method read it
            raise unreadable(self.db_path, exc) from exc

    def _engine_options(self, spec: MethodSpec) -> dict[str, Any]:
        """The server's one engine for a method that takes one; a method whose engine is optional, on a server
        without one, gets the options that keep it off any model (it must never start its own here)."""
        if spec.takes_engine and self.engine is not None:
            return {"engine": self.engine}
        if spec.takes_engine and self.engine_expected and self.engine_error is None:
            raise Unavailable("the model is still loading", code="Loading",
                              hint="try again in a moment; GET /healthz shows the progress")
        if spec.needs_engine and self.engine_error is not None:
            raise self.engine_error
        # No model here (none asked for, or it failed to start): a method that can do without runs without.
        return dict(spec.engine_free) if spec.engine == "optional" else {}

    def close(self) -> None:
        self._closing = True
        self.methods.close()
        if self.engine is not None:
            self.engine.close()
