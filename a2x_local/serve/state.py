"""What one server process holds: the registry snapshot, the search methods built over it, and one engine.

Hot tree switch: every request starts by asking for the current snapshot. That costs one `stat` of the database
file; only when the file changed is the registry's identity (fingerprint, active tree id) read, and only when that
changed is a new snapshot read. Methods are built on first use per snapshot (a retrieval method is kept while the
services are unchanged, a tree method while the tree is too) and handed to the request, so a request in flight
finishes with the method and tree it started with while the next request uses the new ones. When a method cannot
be built for a new snapshot (say the registry changed and the tree has not been rebuilt yet), the method of the
previous snapshot keeps serving and /healthz says why.
"""

from __future__ import annotations

import logging
import threading
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from a2x_local.compose import step_method_names
from a2x_local.db import connect
from a2x_local.errors import A2XError, DatabaseBusyError
from a2x_local.search import MethodSpec, SearchMethod, make_method, method_names, method_spec
from a2x_local.serve.config import ServeConfig
from a2x_local.serve.errors import BadRequest, Unavailable
from a2x_local.serve.rounds import SharedRounds
from a2x_local.serve.snapshot import (
    FileStamp,
    Identity,
    Snapshot,
    read_identity,
    read_only,
    read_snapshot,
    unreadable,
)
from a2x_local.settings import Settings

log = logging.getLogger("a2x_local.serve")


@dataclass(frozen=True)
class _Built:
    """A method and the registry identity it was built for (``tree`` None: it does not use the tree)."""

    method: SearchMethod
    fingerprint: str
    tree: int | None

    def fits(self, snapshot: Snapshot) -> bool:
        return self.fingerprint == snapshot.fingerprint and (self.tree is None or self.tree == snapshot.build_id)


class ServerState:
    """The snapshot, the methods and the engine; safe to use from the event loop and from worker threads."""

    def __init__(self, settings: Settings, config: ServeConfig, engine: SharedRounds | None = None) -> None:
        self.settings = settings
        self.config = config
        self.db_path = Path(settings.db_path)
        self.engine = engine
        # Every database access and method build goes through this lock: one connection at a time per process
        # (DuckDB refuses a read-only and a read-write connection to one file in one process at once).
        self._lock = threading.RLock()
        self._runtime_settings = settings.with_overrides("registry", lock_timeout_s=config.reload_lock_wait_s)
        self._snapshot: Snapshot | None = None
        self._stamp: FileStamp | None = None
        self._methods: dict[str, _Built] = {}
        self._failed: dict[str, tuple[Identity, Unavailable]] = {}  # method -> identity it failed on, why
        self.problems: dict[str, str] = {}
        self.degraded: str | None = None   # why the file under the server cannot be read now (None: it can)

    # --- the snapshot -------------------------------------------------------------------------------------------

    def start(self) -> Snapshot:
        """The first snapshot (waiting for a writer as long as any command does), then the preloaded methods."""
        with self._lock:
            if not self.db_path.is_file():
                raise Unavailable(f"{self.db_path}: no registry database here",
                                  hint="load services first: a2x-local ingest PATH --db FILE")
            # Once, as every command does: bring an older registry file to this version's schema.
            with connect(self.db_path, lock_timeout_s=self.settings.lock_timeout_s):
                pass
            stamp = FileStamp.of(self.db_path)
            with read_only(self.db_path, wait_s=self.settings.lock_timeout_s) as con:
                self._snapshot = read_snapshot(con, generation=0)
            self._stamp = stamp
        for name in self.config.preload:
            try:
                self.method(name, self._snapshot)
            except A2XError as exc:
                log.info("method %s not preloaded: %s", name, exc.message)
        return self._snapshot

    @property
    def snapshot(self) -> Snapshot:
        if self._snapshot is None:
            raise Unavailable("the server has not read the registry yet", hint="wait a moment and try again")
        return self._snapshot

    @property
    def latest(self) -> Snapshot | None:
        """The snapshot held now, without looking at the database (None before start)."""
        return self._snapshot

    def is_current(self) -> bool:
        """True when the database file is unchanged since the last check (one stat: fine on the event loop)."""
        return self._snapshot is not None and FileStamp.of(self.db_path) == self._stamp

    def current(self) -> Snapshot:
        """The snapshot to answer a new request from, reloaded first when the registry or its tree changed."""
        if self.is_current():
            return self.snapshot
        with self._lock:
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

    # --- the methods ----------------------------------------------------------------------------------------------

    def can_run(self, spec: MethodSpec) -> bool:
        """Whether this server can run the method: it needs no engine, or the server has one."""
        return not spec.needs_engine or self.engine is not None

    def uses_engine(self, name: str) -> bool:
        """Whether the method's searches run on this server's engine (they then join its shared rounds)."""
        return method_spec(name).takes_engine and self.engine is not None

    def offered(self, *, steps: bool = False) -> list[str]:
        """The methods this server can run (``steps``: those that may search a compose plan's steps)."""
        names = step_method_names() if steps else method_names()
        return [name for name in names if self.can_run(method_spec(name))]

    def participant(self) -> AbstractContextManager[object]:
        """Work on the engine says so (the shared rounds then know who may still join a round); a no-op without."""
        return self.engine.participant() if self.engine is not None else nullcontext()

    def check_method(self, name: str, *, steps: bool = False) -> None:
        """Refuse unknown methods, and methods that need a model on a server without one, before anything is built;
        the hint lists only what this server can run (``steps``: as a compose step method)."""
        offered = self.offered(steps=steps)
        if name not in (step_method_names() if steps else method_names()):
            raise BadRequest(f"unknown search method '{name}'", hint=f"choose one of: {', '.join(offered)}",
                             code="UnknownMethod")
        if not self.can_run(method_spec(name)):
            raise Unavailable(f"method '{name}' needs a model, and this server runs without one",
                              hint="start the server with --model ALIAS (see `a2x-local models list`), or use one of: "
                                   f"{', '.join(offered)}", code="NoModel")

    def cached_method(self, name: str, snapshot: Snapshot) -> SearchMethod | None:
        built = self._methods.get(name)
        return built.method if built is not None and built.fits(snapshot) else None

    def method(self, name: str, snapshot: Snapshot) -> SearchMethod:
        """The method for this snapshot: the cached one when it fits, else a new one. When a new one cannot be
        built, the previous one keeps serving (the reason kept in ``problems``); the failure is remembered for this
        registry identity, so requests do not retry the build until the registry changes again."""
        self.check_method(name)
        found = self.cached_method(name, snapshot)
        if found is not None:
            return found
        with self._lock:
            found = self.cached_method(name, snapshot)
            if found is not None:
                return found
            previous = self._methods.get(name)
            failed = self._failed.get(name)
            if failed is not None and failed[0] == snapshot.identity:
                if previous is not None:
                    return previous.method
                raise failed[1]
            options = self._engine_options(method_spec(name))
            try:
                try:
                    method = make_method(name, self._runtime_settings, self.db_path, **options)
                except duckdb.Error as exc:   # the file under the server failed while the method read it
                    raise unreadable(self.db_path, exc) from exc
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
            describe = getattr(method, "describe", None)
            tree = describe().get("tree") if callable(describe) else None
            self._methods[name] = _Built(method, snapshot.fingerprint, tree)
            self.problems.pop(name, None)
            self._failed.pop(name, None)
            return method

    def _engine_options(self, spec: MethodSpec) -> dict[str, Any]:
        """The server's one engine for a method that takes one; a method whose engine is optional, on a server
        without one, gets the options that keep it off any model (it must never start its own here)."""
        if spec.takes_engine and self.engine is not None:
            return {"engine": self.engine}
        return dict(spec.engine_free) if spec.engine == "optional" else {}

    def close(self) -> None:
        if self.engine is not None:
            self.engine.close()
