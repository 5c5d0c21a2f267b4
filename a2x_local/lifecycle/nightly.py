"""The nightly job: sync from an export, build or update when anything changed, gate, switch, retain, report.

Under one lock per database: sync the registry with the export (all or nothing, removals capped); when nothing
changed and the active tree is current, stop (no model is loaded). Otherwise place the changes into a new version
of the active tree, or build afresh when much changed or there is no tree (answers the cache holds are not asked
again). With a query file, the new tree and the active one answer the same queries and the new one is activated
only if its hit rate drops by at most the allowed points; then completed trees beyond the kept number and
superseded failed builds are deleted (never the active one) and unused cached answers expire. A JSON report is
written in every case, failures included, and the exit code says what happened (`EXIT_CODES`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from a2x_local.db import connect
from a2x_local.errors import A2XError, UserError
from a2x_local.lifecycle.config import LifecycleConfig
from a2x_local.lifecycle.engine import LazyEngine
from a2x_local.lifecycle.gate import run_gate
from a2x_local.lifecycle.lock import EXIT_BUSY, NightlyBusyError, NightlyLock
from a2x_local.lifecycle.report import write_report
from a2x_local.lifecycle.retention import apply_retention
from a2x_local.lifecycle.update import run_update
from a2x_local.llm import AnswerCache, CacheConfig, Engine
from a2x_local.locks import RegistryBusyError, RegistryLock
from a2x_local.outfiles import output_target
from a2x_local.registry import Limits, Registry, RegistryConfig, sync
from a2x_local.settings import Settings
from a2x_local.taxonomy import activate, active_build_id, get_build, load_tree, run_build

EXIT_OK, EXIT_FAILED, EXIT_GATE_REFUSED = 0, 1, 3
EXIT_CODES = {EXIT_OK: "a new tree was activated, or nothing changed", EXIT_FAILED: "the job failed (see the report's"
              " error; the active tree is unchanged)", 2: "usage error (bad flags)",
              EXIT_GATE_REFUSED: "the regression gate refused the new tree (kept, not active)",
              EXIT_BUSY: "another nightly job, or another writer of the registry, holds the database (this run was"
                         " skipped)"}


@dataclass
class NightlyRequest:
    """What one run is asked to do (flags override the `[lifecycle]` table)."""

    source: list[Path]
    model: str
    fmt: str = "auto"
    queries: Path | None = None
    max_drop: float | None = None
    keep: int | None = None
    force: bool = False
    rebuild: bool = False
    report: Path | None = None


@dataclass
class NightlyOutcome:
    report: dict[str, Any]
    path: Path
    exit_code: int
    error: A2XError | None = None


def report_path(settings: Settings, request: NightlyRequest, started: datetime) -> Path:
    if request.report is not None:
        return Path(request.report)
    folder = Path(LifecycleConfig.from_settings(settings).report_dir).expanduser()
    if not folder.is_absolute():
        folder = settings.home / folder
    return folder / f"nightly-{started:%Y%m%d-%H%M%S}.json"


def run_nightly(settings: Settings, request: NightlyRequest, load_engine: Callable[[], Engine], *,
                observer: Any = None) -> NightlyOutcome:
    """Run the job once; raises `NightlyBusyError` (exit 4) only when another job holds the lock."""
    started = datetime.now()
    path = report_path(settings, request, started)
    report: dict[str, Any] = {"started_at": started.isoformat(timespec="seconds"), "db": str(settings.db_path),
                              "source": [str(p) for p in request.source], "model": request.model,
                              "status": "running", "exit_code": None, "action": None, "candidate": None,
                              "sync": None, "update": None, "build": None, "gate": None, "retention": None,
                              "error": None}
    output_target(path, what="nightly report")   # a path that cannot take the report is refused before any work
    engines = LazyEngine(load_engine)
    clock = time.perf_counter()
    with ExitStack() as held:
        try:
            held.enter_context(NightlyLock(settings.db_path, "nightly"))
            held.enter_context(RegistryLock(settings.db_path, "nightly", wait_s=settings.lock_timeout_s))
        except (NightlyBusyError, RegistryBusyError) as exc:
            report["status"], report["error"] = "skipped", exc.to_dict()
            _finish(report, engines, clock, EXIT_BUSY, path)   # a skipped run is reported too
            if isinstance(exc, NightlyBusyError):
                raise
            raise NightlyBusyError(exc.message, hint="the job that holds the registry ends on its own; this run was"
                                                     " skipped (exit code 4)", code="RegistryBusy") from exc
        try:
            code = _run(settings, request, engines, report, path, observer)
            error = None
        except A2XError as exc:
            code, error = exc.exit_code, exc
            report["status"], report["error"] = "failed", exc.to_dict()
            _record_active_after(settings, report)
        except KeyboardInterrupt:
            report["status"] = "interrupted"
            _record_active_after(settings, report)
            _finish(report, engines, clock, 130, path)
            raise
        finally:
            engines.close()
        _finish(report, engines, clock, code, path)
    return NightlyOutcome(report, path, code, error)


def _check_still_current(con: Any, candidate: int, active: int | None) -> None:
    """Before switching: the registry is still the one the new tree was built for, and the active tree is still the
    one the job started from. The registry lock keeps other writers out; this catches anything that did not take
    it (another version of a2x-local, a hand edit), so the job never undoes a rollback or activates a tree built
    for other services."""
    fingerprint = Registry(con).fingerprint()
    built_for = get_build(con, candidate).registry_fingerprint
    now_active = active_build_id(con)
    if fingerprint != built_for or now_active != active:
        what = ("the registry's services changed" if fingerprint != built_for else
                f"the active tree changed from {active} to {now_active}")
        raise UserError(f"{what} while the job ran; tree {candidate} was kept but not activated",
                        hint=f"look at `a2x-local tree list`; `a2x-local tree activate {candidate}` switches by hand,"
                             " or the next night builds for the registry as it is then", code="RegistryChanged")


def _record_active_after(settings: Settings, report: dict[str, Any]) -> None:
    """After a failed or interrupted job: the tree that is active now (a failure activates nothing, so the one that
    was). A registry that cannot be read leaves the key out, and the report says "unknown", not "none"."""
    try:
        with connect(settings.db_path, lock_timeout_s=settings.lock_timeout_s, mode="read") as con:
            report["active_after"] = active_build_id(con)
    except A2XError as exc:   # the job's own error is already in the report; this one only costs the line
        report["active_after_error"] = exc.message


def _finish(report: dict[str, Any], engines: LazyEngine, clock: float, code: int, path: Path) -> None:
    report["exit_code"] = code
    report["usage"] = engines.usage().to_dict()
    report["finished_at"] = datetime.now().isoformat(timespec="seconds")
    report["wall_seconds"] = round(time.perf_counter() - clock, 2)
    write_report(path, report)


def _run(settings: Settings, request: NightlyRequest, engines: LazyEngine, report: dict[str, Any], path: Path,
         observer: Any) -> int:
    config = LifecycleConfig.from_settings(settings, max_drop=request.max_drop, keep_trees=request.keep)
    registry_config = RegistryConfig.from_settings(settings)
    db, timeout = settings.db_path, settings.lock_timeout_s
    with connect(db, lock_timeout_s=timeout) as con:
        active = report["active_before"] = active_build_id(con)   # known even when the sync fails
        result = sync(con, request.source, max_remove_share=registry_config.sync_max_remove_share, fmt=request.fmt,
                      limits=Limits.from_config(registry_config), force=request.force,
                      allow_lookalikes=registry_config.allow_lookalikes)
        registry = Registry(con)
        fingerprint, size = registry.fingerprint(), registry.count()
        current = active is not None and get_build(con, active).registry_fingerprint == fingerprint
    report["sync"] = result.to_dict()
    changed = len(result.added) + len(result.updated) + len(result.removed)
    share = changed / max(size, 1)
    if active is None:
        action, reason = "build", "no active tree"
    elif request.rebuild:
        action, reason = "build", "--rebuild"
    elif current:
        action, reason = "none", "the export and the active tree match the registry"
    elif share > config.rebuild_above_share:
        action, reason = "build", (f"{share:.1%} of the registry changed, more than rebuild_above_share"
                                   f" {config.rebuild_above_share:.0%}")
    else:
        action, reason = "update", f"{changed:,} services changed ({share:.1%} of the registry)"
    report["action"], report["reason"] = action, reason

    candidate = None
    if action == "update":
        outcome = run_update(settings, load_engine=engines.get, model=request.model, placement="model",
                             activate=False, observer=observer, close_engine=False)
        report["update"] = outcome.to_dict()
        candidate = outcome.build_id
        if candidate is None:
            action = report["action"] = "none"
    elif action == "build":
        built = run_build(settings, engines.get, model=request.model, observer=observer, close_engine=False,
                          activate=False)
        candidate = built.build_id
        report["build"] = {"id": built.build_id, "tree": built.report["tree"], "usage": built.report["usage"],
                           "engine_rounds": built.report["engine_rounds"], "notes": built.notes}
    report["candidate"] = candidate

    code = EXIT_OK
    if candidate is None:
        report["status"] = "no_change"
    else:
        gate_passed = True
        if request.queries is not None and active is not None:
            with connect(db, lock_timeout_s=timeout) as con:
                new_tree, old_tree = load_tree(con, candidate), load_tree(con, active)
                services = {s.id: s for s in Registry(con).all()}
            gate = run_gate(settings, candidate=new_tree, active=old_tree, services=services, engine=engines.get(),
                            queries_file=request.queries, max_drop=config.max_drop,
                            out_dir=path.with_name(path.stem + "-gate"))
            report["gate"] = gate.to_dict()
            gate_passed = gate.passed
        elif request.queries is not None:
            report["gate"] = {"skipped": "no active tree to compare with"}
        if gate_passed:
            with connect(db, lock_timeout_s=timeout) as con:
                _check_still_current(con, candidate, active)
                activate(con, candidate)
            report["status"] = "activated"
        else:
            report["status"] = "gate_refused"
            code = EXIT_GATE_REFUSED
    with connect(db, lock_timeout_s=timeout) as con:
        report["retention"] = apply_retention(con, config.keep_trees)
        report["active_after"] = active_build_id(con)
    cache = AnswerCache(db, lock_timeout_s=timeout)
    report["cache"] = {"expired": cache.prune(CacheConfig.from_settings(settings).keep_days), "entries": cache.size()}
    return code
