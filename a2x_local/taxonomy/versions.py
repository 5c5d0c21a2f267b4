"""Tree versions made from another tree (incremental placement, re-split leaves): stored as completed builds of
kind 'update' that name their parent, so `tree list` shows the lineage and `tree activate` can go back to any."""

from __future__ import annotations

from typing import Any

import duckdb

from a2x_local.llm import Usage
from a2x_local.taxonomy import store
from a2x_local.taxonomy.prompts import prompt_hash
from a2x_local.taxonomy.types import Tree

UPDATE_KIND = "update"


def save_version(con: duckdb.DuckDBPyConnection, tree: Tree, *, parent_id: int, fingerprint: str,
                 stats: dict[str, Any], usage: Usage | None = None, model: str | None = None,
                 engine: str | None = None, engine_settings: dict[str, Any] | None = None,
                 thresholds: dict[str, Any] | None = None, resplit: bool = False, wall_seconds: float = 0.0,
                 activate: bool = False) -> int:
    """Store ``tree`` as a completed version derived from ``parent_id`` (all or nothing) and return its id.
    ``resplit``: build steps made some of its categories (their prompts' hash is recorded, as a build's is)."""
    store.get_build(con, parent_id)
    return store.save_completed(con, tree, kind=UPDATE_KIND, fingerprint=fingerprint, stats=stats,
                                make_active=activate, usage=usage,
                                finished={"rounds": usage.rounds if usage is not None else 0,
                                          "wall_seconds": round(wall_seconds, 3)},
                                model=model, engine=engine, engine_settings=engine_settings, thresholds=thresholds,
                                prompt_hash=prompt_hash() if resplit else None, parent_id=parent_id)
