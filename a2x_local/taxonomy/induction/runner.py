"""Running a build against the database: lock, record, checkpoint every round, resume, fail cleanly, switch.

The DuckDB file is opened only around short writes (record, checkpoint, final save), never while the model
works, so other commands keep running and the active tree keeps serving during a nightly build. A checkpoint waits
for a busy database (`[registry] checkpoint_wait_s`, minutes) and a round the database will not take is kept in a
file beside it (spill.py), so finished work is never thrown away. The new tree becomes active in the same
transaction that marks its build completed, unless the registry lost services it files while it was built.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from a2x_local.db import connect, transaction
from a2x_local.errors import A2XError, UserError
from a2x_local.llm import Engine, Usage, model_identity
from a2x_local.locks import RegistryLock
from a2x_local.registry import Registry, RegistryConfig, Service
from a2x_local.settings import Settings
from a2x_local.taxonomy import store
from a2x_local.taxonomy.config import BuildConfig
from a2x_local.taxonomy.induction.builder import Builder, RoundObserver
from a2x_local.taxonomy.induction.keywords import require_embedding
from a2x_local.taxonomy.induction.language import with_category_language
from a2x_local.taxonomy.induction.report import build_report
from a2x_local.taxonomy.induction.spill import read_spill, remove_spill, write_spill
from a2x_local.taxonomy.induction.state import BuildState
from a2x_local.taxonomy.lock import BuildLock
from a2x_local.taxonomy.prompts import prompt_hash
from a2x_local.taxonomy.types import Tree

# What --resume may continue (a build still marked running is marked interrupted first: see _prepare).
RESUMABLE = ("interrupted", "failed")


@dataclass
class BuildOutcome:
    build_id: int
    tree: Tree
    report: dict[str, Any]
    resumed: bool
    notes: list[str] = field(default_factory=list)
    active: bool = True


@dataclass
class _Run:
    build_id: int
    state: BuildState
    base_usage: Usage
    resumed: bool


@dataclass(frozen=True)
class _Waits:
    """Seconds to wait for a busy database: before the work starts, and once rounds are done (far longer)."""

    start: float
    checkpoint: float


def run_build(settings: Settings, load_engine: Callable[[], Engine], *, model: str, config: BuildConfig | None = None,
              resume: bool = False, observer: RoundObserver | None = None, close_engine: bool = True,
              activate: bool = True) -> BuildOutcome:
    """Build (or resume) a tree of the registry at ``settings.db_path``, store it and (``activate``) make it active;
    every failure leaves a resumable record. The nightly job builds with ``activate=False`` and switches only after
    its gate.

    ``config``: the build's settings (default: the settings' `[build]` table, as `BuildConfig.from_settings` gives
    it with a command's flags). The database waits are the settings' `[registry]` lock_timeout_s and
    checkpoint_wait_s (how long a finished round waits for a busy database; past it, the round is kept in a file
    and the build stops, resumable)."""
    config = config or BuildConfig.from_settings(settings)
    require_embedding(config)
    db_path = settings.db_path
    waits = _Waits(settings.lock_timeout_s, RegistryConfig.from_settings(settings).checkpoint_wait_s)
    with BuildLock(db_path), RegistryLock(db_path, "build", wait_s=waits.start):
        run, services, config = _prepare(db_path, config, model=model, identity=model_identity(settings, model),
                                         resume=resume, lock_timeout_s=waits.start)
        return _execute(db_path, config, load_engine, run, services, observer=observer, close_engine=close_engine,
                        waits=waits, activate=activate)


def _prepare(db_path: Path, config: BuildConfig, *, model: str, identity: dict[str, str], resume: bool,
             lock_timeout_s: float) -> tuple[_Run, dict[str, Service], BuildConfig]:
    """The build record (new or resumed), the registry's services, and the settings with the category language
    resolved from them (so the record, a resume and every prompt name the same language). ``identity`` is what
    the model name resolved to (`model_identity`): a resume compares it, not the name."""
    with connect(db_path, lock_timeout_s=lock_timeout_s, verify=True) as con:
        # We hold the build lock, so a build still marked running belongs to a process that died.
        con.execute("UPDATE builds SET status = 'interrupted' WHERE status = 'running' AND kind = 'build'")
        registry = Registry(con)
        services = {s.id: s for s in registry.all()}
        fingerprint = registry.fingerprint()
        config = with_category_language(config, list(services.values()))
        if resume:
            run = _resume_target(con, db_path, config, model=model, identity=identity, fingerprint=fingerprint)
        else:
            build_id = store.create_build(con, kind="build", registry_fingerprint=fingerprint,
                                          service_count=len(services), model=model,
                                          thresholds=config.thresholds(), prompt_hash=prompt_hash())
            state = BuildState.start(sorted(services))
            state.model_identity = identity
            run = _Run(build_id, state, Usage(), resumed=False)
    if not services:
        _fail(db_path, run.build_id, "the registry is empty", lock_timeout_s)
        raise UserError("the registry is empty: nothing to build a tree from",
                        hint="add services first with `a2x-local ingest PATH`")
    return run, services, config


def _resume_target(con: Any, db_path: Path, config: BuildConfig, *, model: str, identity: dict[str, str],
                   fingerprint: str) -> _Run:
    builds = [b for b in store.list_builds(con) if b.kind == "build"]
    if not builds:
        raise UserError("there is no build to resume", hint="start one with `a2x-local build --model ALIAS`")
    record = builds[-1]
    if record.status not in RESUMABLE:
        raise UserError(f"nothing to resume: the latest build ({record.id}) is {record.status}",
                        hint="start a new build without --resume")
    stored, kept = store.latest_checkpoint(con, record.id), read_spill(db_path, record.id)
    checkpoint = kept if kept is not None and (stored is None or kept[0] > stored[0]) else stored
    if checkpoint is None:
        raise UserError(f"build {record.id} stopped before its first round finished; there is nothing to resume",
                        hint="start a new build without --resume")
    _round, _stage, data = checkpoint
    state = BuildState.from_dict(data)
    problems = []
    # The model the build started with, by what its name resolved to then (an alias and its folder are one model;
    # the same name over other weights is not); a checkpoint from before identities were recorded has the name.
    if (state.model_identity != identity) if state.model_identity else (record.model != model):
        changed = "" if record.model != model else ": its files changed"
        problems.append(f"model {record.model!r} (now {model!r}{changed})")
    if record.registry_fingerprint != fingerprint:
        problems.append("the registry (services changed since it started)")
    if record.prompt_hash != prompt_hash():
        problems.append("the prompt files")
    changed = sorted(k for k, v in config.thresholds().items() if record.thresholds.get(k) != v)
    if changed:
        problems.append("[build] settings " + ", ".join(
            f"{k}={record.thresholds.get(k)!r} (now {config.thresholds()[k]!r})" for k in changed))
    if problems:
        raise UserError(f"build {record.id} cannot be resumed with different " + "; ".join(problems),
                        hint="resume with the same model and settings, or start a new build without --resume")
    store.update_build(con, record.id, status="running", error=None)
    return _Run(record.id, state, Usage.from_dict(state.usage), resumed=True)


def _execute(db_path: Path, config: BuildConfig, load_engine: Callable[[], Engine], run: _Run,
             services: dict[str, Service], *, observer: RoundObserver | None, close_engine: bool,
             waits: _Waits, activate: bool) -> BuildOutcome:
    try:
        engine = load_engine()
    except A2XError as exc:
        _fail(db_path, run.build_id, f"model failed to load: {exc.message}", waits.start)
        raise
    except Exception as exc:
        message = f"model failed to load: {type(exc).__name__}: {exc}"
        _fail(db_path, run.build_id, message, waits.start)
        raise UserError(message, hint="`a2x-local models check ALIAS` explains what is missing") from exc
    try:
        with connect(db_path, lock_timeout_s=waits.start) as con:
            store.update_build(con, run.build_id, engine=engine.name, engine_settings=engine.describe())
        return _loop(db_path, config, engine, run, services, observer=observer, waits=waits, activate=activate)
    finally:
        if close_engine:
            engine.close()


def _loop(db_path: Path, config: BuildConfig, engine: Engine, run: _Run, services: dict[str, Service], *,
          observer: RoundObserver | None, waits: _Waits, activate: bool) -> BuildOutcome:
    state = run.state
    builder = Builder(state, services, config, engine, observer)
    started = time.perf_counter()
    wall_before = state.wall_seconds
    # The engine may be shared with earlier work in this process (vLLM keeps one per process): count only this run.
    engine_before = engine.usage.snapshot()

    def totals() -> Usage:
        usage = run.base_usage.snapshot()
        usage.merge(engine.usage.since(engine_before))
        return usage

    while not builder.finished:
        try:
            step = builder.step()
        except KeyboardInterrupt:
            _fail(db_path, run.build_id, "interrupted; resume with `a2x-local build --resume`", waits.start)
            raise
        except A2XError as exc:
            _fail(db_path, run.build_id, exc.message, waits.start)
            raise
        except Exception as exc:
            message = f"engine failed during the build: {type(exc).__name__}: {exc}"
            _fail(db_path, run.build_id, message, waits.start)
            raise UserError(message, hint="fix the cause (memory, model files), then `a2x-local build --resume`"
                            " continues from the last finished round") from exc
        state.wall_seconds = wall_before + time.perf_counter() - started
        usage = totals()
        state.usage = usage.to_dict()           # what a resume starts counting from
        _checkpoint(db_path, run.build_id, state, usage.rounds, step or "done", waits)
    return _complete(db_path, config, run, state, totals(), waits, activate)


def _checkpoint(db_path: Path, build_id: int, state: BuildState, rounds: int, stage: str, waits: _Waits) -> None:
    """The state after a round, or (when the database will not take it) the same state in a file beside it;
    per-call-type usage goes to build_usage only when the build completes."""
    data = state.to_dict()
    try:
        with connect(db_path, lock_timeout_s=waits.checkpoint) as con, transaction(con):
            store.save_checkpoint(con, build_id, rounds, stage, data)
            store.prune_checkpoints(con, build_id, keep_round=rounds)
            store.update_build(con, build_id, rounds=rounds, wall_seconds=round(state.wall_seconds, 3))
    except A2XError as exc:
        kept = write_spill(db_path, build_id, rounds, stage, data)
        where = (f"round {rounds} is kept in {kept}; `a2x-local build --resume` continues from it" if kept else
                 f"round {rounds} could not be kept anywhere either; `a2x-local build --resume` continues from the"
                 " last round the database holds")
        raise UserError(f"build {build_id} stopped: its round {rounds} could not be saved to the database"
                        f" ({exc.message})", hint=f"{where} once the cause is fixed ({exc.hint or 'see above'})",
                        code=exc.code) from exc
    remove_spill(db_path, build_id)


def _registry_drift(con: Any, tree: Tree) -> tuple[list[str], int]:
    """(services the tree files that are gone now, registry services it does not place) for a registry that
    changed while the build ran."""
    current = Registry(con).ids()
    placed = tree.service_ids()
    return sorted(placed - current), len(current - placed)


def _one_level_note(services: int, config: BuildConfig, counters: dict[str, int]) -> str:
    """Why the tree is one node: a registry small enough, or a model whose design of the root was unusable."""
    if services <= config.leaf_max_services:
        return (f"the registry has {services:,} services, not more than θ_leaf = {config.leaf_max_services}: the tree"
                " is a single node holding every service")
    duplicates = counters.get("duplicate_categories_dropped", 0)
    why = f" ({duplicates} repeated categories dropped)" if duplicates else ""
    return (f"the model's design of the root was unusable{why}: fewer than {config.min_children} distinct categories,"
            f" so the tree is a single node holding all {services:,} services and a search selects among all of them"
            " (a stronger model designs a tree; `a2x-local tree show` shows this one)")


def _complete(db_path: Path, config: BuildConfig, run: _Run, state: BuildState, usage: Usage,
              waits: _Waits, activate: bool) -> BuildOutcome:
    notes = []
    with connect(db_path, lock_timeout_s=waits.checkpoint) as con:
        fingerprint = store.get_build(con, run.build_id).registry_fingerprint
        tree = state.tree(fingerprint)
        report = build_report(state, tree, config, usage)
        if report["one_level"]:
            notes.append(_one_level_note(len(tree.root.services), config, report.get("counters", {})))
        if Registry(con).fingerprint() != fingerprint:
            gone, unplaced = _registry_drift(con, tree)
            change = (f"the registry changed while the tree was built: {unplaced:,} service(s) are not placed in it,"
                      f" {len(gone):,} it files were removed")
            activate = activate and not gone
            notes.append(change + ("; it serves as a stale tree until the next build" if not gone else
                                   f" (e.g. {gone[0]!r}); it was NOT activated, the previous tree keeps serving"
                                   f" (`a2x-local tree activate {run.build_id}` uses it anyway)"))
            report["warnings"] = [*report.get("warnings", []), notes[-1]]
        with transaction(con):
            store.save_tree(con, run.build_id, tree)
            store.save_usage(con, run.build_id, usage)
            store.update_build(con, run.build_id, status="completed", finished_at=datetime.now(), stats=report,
                               rounds=usage.rounds, wall_seconds=round(state.wall_seconds, 3), error=None)
            if activate:
                store.activate(con, run.build_id)
            store.prune_checkpoints(con, run.build_id, keep_round=None)
    remove_spill(db_path, run.build_id)
    tree.build_id = run.build_id
    return BuildOutcome(run.build_id, tree, report, run.resumed, notes, active=activate)


def _fail(db_path: Path, build_id: int, message: str, lock_timeout_s: float) -> None:
    """Record why the build stopped; when the database cannot take even that, the record reads as interrupted
    (no process holds the build lock), which resumes the same way, and the original error is what the user sees."""
    try:
        with connect(db_path, lock_timeout_s=lock_timeout_s) as con:
            store.update_build(con, build_id, status="failed", finished_at=datetime.now(), error=message)
    except A2XError:
        return
