"""Retention: keep the newest completed trees, delete older ones, never the active tree (nor one being built).

Only completed trees count toward the number kept, so a run of failed nights cannot push out the trees kept
for rollback. A failed or interrupted build is kept while it is newer than the newest completed tree (the latest
failure's diagnostics; an interrupted build may still be resumed); a finished build supersedes it.
"""

from __future__ import annotations

from typing import Any

import duckdb

from a2x_local.taxonomy import active_build_id, delete_build, list_builds


def apply_retention(con: duckdb.DuckDBPyConnection, keep: int) -> dict[str, Any]:
    """Delete every tree but the ``keep`` newest completed ones, the active one, running builds and unfinished
    builds newer than the newest completed tree; returns kept and deleted ids."""
    if keep < 1:
        raise ValueError("keep at least one tree")
    active = active_build_id(con)
    statuses = {r.id: r.status for r in list_builds(con)}
    kept = _kept(statuses, keep)
    if active is not None:
        kept.add(active)
    deleted = sorted(set(statuses) - kept)
    for build_id in deleted:
        delete_build(con, build_id)
    return {"keep": keep, "kept": sorted(kept), "deleted": deleted, "active": active}


def _kept(statuses: dict[int, str], keep: int) -> set[int]:
    """The ids retention keeps from ``statuses`` (build id: status), the active tree aside; ids grow with time,
    so the highest is the newest."""
    completed = sorted((i for i, status in statuses.items() if status == "completed"), reverse=True)
    newest = completed[0] if completed else 0
    unsuperseded = {i for i, status in statuses.items() if status != "completed" and i > newest}
    running = {i for i, status in statuses.items() if status == "running"}
    return set(completed[:keep]) | unsuperseded | running
