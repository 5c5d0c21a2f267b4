"""`tree update`: a new tree version from an existing one, without a rebuild.

Services the registry gained or rewrote since the tree was made are placed into it, services it lost are taken
out, and (with the model) leaves that placement pushed past θ_leaf are split again with the build's own steps.
The result is stored as a new version that names its parent; the parent keeps serving until the new one is
activated, and nothing is stored when anything fails. The build lock is held throughout, so an update and a build
never write versions at the same time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from a2x_local.db import connect
from a2x_local.errors import UserError
from a2x_local.lifecycle.config import LifecycleConfig
from a2x_local.lifecycle.engine import LazyEngine
from a2x_local.lifecycle.placement import (
    BY_EMBEDDING,
    BY_MODEL,
    Changes,
    Placement,
    place_by_embedding,
    place_by_model,
    registry_changes,
    with_placements,
)
from a2x_local.llm import Engine, Usage
from a2x_local.locks import RegistryLock
from a2x_local.registry import Registry
from a2x_local.settings import Settings
from a2x_local.taxonomy import (
    BuildConfig,
    BuildLock,
    Tree,
    get_build,
    load_active_tree,
    load_tree,
    overfull_leaves,
    resplit_nodes,
    save_version,
)

EngineLoader = Callable[[], Engine]


@dataclass
class UpdateOutcome:
    """What an update did; ``build_id`` is None when there was nothing to do."""

    base_id: int
    build_id: int | None
    placement: str
    changes: Changes
    placements: dict[str, Placement]
    overfull: list[dict[str, Any]]
    split: list[str] = field(default_factory=list)
    still_overfull: list[dict[str, Any]] = field(default_factory=list)
    resplit: dict[str, Any] | None = None
    usage: Usage = field(default_factory=Usage)
    activated: bool = False
    notes: list[str] = field(default_factory=list)
    tree: Tree | None = None
    wall_seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"base": self.base_id, "build": self.build_id, "activated": self.activated,
                "placement": self.placement, "changes": self.changes.to_dict(),
                "placed": [p.to_dict() for p in self.placements.values()],
                "overfull_after_placement": self.overfull, "resplit": self.split,
                "still_overfull": self.still_overfull, "resplit_rounds": self.resplit,
                "usage": self.usage.to_dict(), "notes": self.notes, "wall_seconds": round(self.wall_seconds, 2)}


def run_update(settings: Settings, *, load_engine: EngineLoader | None, model: str | None = None,
               base_id: int | None = None, placement: str | None = None, resplit: bool = True,
               activate: bool = True, build_overrides: dict[str, Any] | None = None, observer: Any = None,
               close_engine: bool = True) -> UpdateOutcome:
    """Place the registry's changes into tree ``base_id`` (default: the active tree) as a new version.

    ``placement`` "model" needs ``load_engine`` (called only when there is model work); "embedding" loads no LLM
    and re-splits nothing (over-full leaves are listed for a later `tree update` with the model).
    """
    config = LifecycleConfig.from_settings(settings, placement=placement)
    build = BuildConfig.from_settings(settings, **(build_overrides or {}))
    by_model = config.placement == "model"
    if by_model and load_engine is None:
        raise UserError("placement by the model needs a model", hint="pass --model, or --placement embedding")
    started = time.perf_counter()
    db_path, timeout = settings.db_path, settings.lock_timeout_s
    with BuildLock(db_path), RegistryLock(db_path, "tree update", wait_s=timeout):
        with connect(db_path, lock_timeout_s=timeout) as con:
            base = load_tree(con, base_id) if base_id is not None else load_active_tree(con)
            record = get_build(con, base.build_id)
            registry = Registry(con)
            services = {s.id: s for s in registry.all()}
            fingerprint = registry.fingerprint()
            rewritten = registry.updated_since(record.created_at)
        changes = registry_changes(base, set(services), rewritten)
        outcome = UpdateOutcome(base.build_id, None, BY_MODEL if by_model else BY_EMBEDDING, changes, {}, [])
        trimmed = base.without_services(set(changes.removed) | set(changes.changed))
        engines = LazyEngine(load_engine)
        try:
            if changes.to_place and by_model:
                outcome.placements = place_by_model(settings, trimmed, services, changes.to_place, engines.get(),
                                                    config, build.generic_limit)
            elif changes.to_place:
                outcome.placements = place_by_embedding(trimmed, services, changes.to_place, config)
            tree = with_placements(trimmed, outcome.placements)
            outcome.overfull = overfull_leaves(tree, build)
            splittable = [leaf["node"] for leaf in outcome.overfull if leaf["splittable"]]
            if splittable and resplit and by_model:
                result = resplit_nodes(tree, services, build, engines.get(), splittable, observer=observer)
                tree, outcome.split = result.tree, result.split
                outcome.resplit = result.to_dict()
                if result.error:
                    outcome.notes.append(f"re-splitting the over-full leaves failed, they stay as they are: "
                                         f"{result.error}")
            elif splittable and resplit:
                outcome.notes.append(f"{len(splittable)} leaves are over θ_leaf = {build.leaf_max_services}; "
                                     "`a2x-local tree update --model ALIAS` re-splits them with the model")
            outcome.usage = engines.usage()
            engine = engines.engine
            engine_name, engine_settings = (engine.name, engine.describe()) if engine is not None else (None, {})
        finally:
            if close_engine:
                engines.close()
        outcome.still_overfull = overfull_leaves(tree, build)
        outcome.wall_seconds = time.perf_counter() - started
        if not changes.any and not outcome.split:
            outcome.notes.append(f"tree {base.build_id} already holds the registry's services; no new version")
            return outcome
        if not by_model:
            engine_settings = {"placement": BY_EMBEDDING, "embedding_model": config.embedding_model}
        stats = {"update": {k: v for k, v in outcome.to_dict().items() if k not in ("usage", "build", "activated")}}
        with connect(db_path, lock_timeout_s=timeout) as con:
            outcome.build_id = save_version(
                con, tree, parent_id=base.build_id, fingerprint=fingerprint, stats=stats,
                usage=outcome.usage if engine is not None else None, model=model if by_model else None,
                engine=engine_name, engine_settings=engine_settings, thresholds=build.thresholds(),
                resplit=bool(outcome.split), wall_seconds=outcome.wall_seconds, activate=activate)
        outcome.activated = activate
        outcome.tree = tree
    return outcome
