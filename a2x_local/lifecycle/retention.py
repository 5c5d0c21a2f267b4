"""Retention: keep the newest trees, delete older ones, never the active tree (nor one being built)."""

from __future__ import annotations

from typing import Any

import duckdb

from a2x_local.taxonomy import active_build_id, delete_build, list_builds


def apply_retention(con: duckdb.DuckDBPyConnection, keep: int) -> dict[str, Any]:
    """Delete every tree but the ``keep`` newest finished ones and the active one; returns kept and deleted ids."""
    if keep < 1:
        raise ValueError("keep at least one tree")
    active = active_build_id(con)
    records = list_builds(con)
    finished = sorted((r.id for r in records if r.status != "running"), reverse=True)
    kept = set(finished[:keep]) | {r.id for r in records if r.status == "running"}
    if active is not None:
        kept.add(active)
    deleted = sorted(r.id for r in records if r.id not in kept)
    for build_id in deleted:
        delete_build(con, build_id)
    return {"keep": keep, "kept": sorted(kept), "deleted": deleted, "active": active}
