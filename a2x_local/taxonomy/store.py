"""Versioned trees in DuckDB: build records, nodes, memberships, usage, checkpoints and the active pointer."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb

from a2x_local.db import load_temp_table, transaction
from a2x_local.errors import UserError
from a2x_local.llm import Usage
from a2x_local.taxonomy.lock import build_running
from a2x_local.taxonomy.types import Tree, TreeNode


@dataclass(frozen=True)
class BuildRecord:
    """One row of `tree list`."""

    id: int
    kind: str
    status: str
    created_at: datetime
    finished_at: datetime | None
    model: str | None
    engine: str | None
    registry_fingerprint: str
    service_count: int
    rounds: int
    wall_seconds: float
    prompt_hash: str | None
    thresholds: dict[str, Any]
    engine_settings: dict[str, Any]
    stats: dict[str, Any]
    error: str | None
    source: str | None
    active: bool
    parent_id: int | None = None

    def to_dict(self) -> dict[str, Any]:
        data = dict(self.__dict__)
        data["created_at"] = self.created_at.isoformat(timespec="seconds")
        data["finished_at"] = self.finished_at.isoformat(timespec="seconds") if self.finished_at else None
        return data


_BUILD_COLUMNS = ("id, kind, status, created_at, finished_at, model, engine, registry_fingerprint, service_count,"
                  " rounds, wall_seconds, prompt_hash, thresholds, engine_settings, stats, error, source, parent_id")


def _json(value: str | None) -> Any:
    return json.loads(value) if value else {}


def create_build(con: duckdb.DuckDBPyConnection, *, kind: str, registry_fingerprint: str, service_count: int,
                 model: str | None = None, engine: str | None = None, engine_settings: dict | None = None,
                 thresholds: dict | None = None, prompt_hash: str | None = None, source: str | None = None,
                 status: str = "running", parent_id: int | None = None) -> int:
    """Record a new build, import or update (``parent_id``: the tree it was made from) and return its id."""
    row = con.execute(
        "INSERT INTO builds (kind, created_at, status, model, engine, engine_settings, thresholds, prompt_hash,"
        " registry_fingerprint, service_count, source, parent_id) VALUES (?, now(), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        " RETURNING id",
        [kind, status, model, engine, json.dumps(engine_settings or {}), json.dumps(thresholds or {}),
         prompt_hash, registry_fingerprint, service_count, source, parent_id],
    ).fetchone()
    return int(row[0])


def get_build(con: duckdb.DuckDBPyConnection, build_id: int) -> BuildRecord:
    active = active_build_id(con)
    row = con.execute(f"SELECT {_BUILD_COLUMNS} FROM builds WHERE id = ?", [build_id]).fetchone()
    if row is None:
        raise UserError(f"no tree with id {build_id}", hint="`a2x-local tree list` shows the trees")
    return _record(row, active, _lock_held(con, [row]))


def list_builds(con: duckdb.DuckDBPyConnection) -> list[BuildRecord]:
    active = active_build_id(con)
    rows = con.execute(f"SELECT {_BUILD_COLUMNS} FROM builds ORDER BY id").fetchall()
    held = _lock_held(con, rows)
    return [_record(row, active, held) for row in rows]


def _lock_held(con: duckdb.DuckDBPyConnection, rows: list[tuple]) -> bool:
    """Whether a build process is alive on this database (asked only when a record says running)."""
    if not any(row[2] == "running" for row in rows):
        return False
    found = con.execute("SELECT path FROM duckdb_databases() WHERE database_name = current_database()").fetchone()
    return bool(found and found[0]) and build_running(Path(found[0]))


def _record(row: tuple, active: int | None, lock_held: bool) -> BuildRecord:
    # A build killed (SIGKILL, power loss, a full disk under its last write) could not record its end: without a
    # process holding the build lock, "running" is shown as what it is, interrupted (and resumable).
    status = "interrupted" if row[2] == "running" and not lock_held else row[2]
    return BuildRecord(
        id=row[0], kind=row[1], status=status, created_at=row[3], finished_at=row[4], model=row[5], engine=row[6],
        registry_fingerprint=row[7], service_count=row[8], rounds=row[9], wall_seconds=row[10],
        prompt_hash=row[11], thresholds=_json(row[12]), engine_settings=_json(row[13]), stats=_json(row[14]),
        error=row[15], source=row[16], active=row[0] == active, parent_id=row[17],
    )


def update_build(con: duckdb.DuckDBPyConnection, build_id: int, **fields: Any) -> None:
    """Set some columns of a build record (JSON columns take Python values)."""
    allowed = {"status", "finished_at", "rounds", "wall_seconds", "stats", "error", "model", "engine",
               "engine_settings", "thresholds", "prompt_hash"}
    unknown = set(fields) - allowed
    if unknown:
        raise ValueError(f"unknown build fields {sorted(unknown)}")
    if not fields:
        return
    values = [json.dumps(v) if k in {"stats", "engine_settings", "thresholds"} else v for k, v in fields.items()]
    assignments = ", ".join(f"{k} = ?" for k in fields)
    con.execute(f"UPDATE builds SET {assignments} WHERE id = ?", [*values, build_id])


def save_tree(con: duckdb.DuckDBPyConnection, build_id: int, tree: Tree) -> None:
    """Write a tree's nodes and memberships (replacing any rows this build already had)."""
    con.execute("DELETE FROM tree_nodes WHERE build_id = ?", [build_id])
    con.execute("DELETE FROM tree_membership WHERE build_id = ?", [build_id])
    node_rows, member_rows = [], []
    positions = {child: k for node in tree.nodes.values() for k, child in enumerate(node.children)}
    for node in tree.walk():
        position = positions.get(node.id, 0)
        node_rows.append({"node_id": node.id, "parent_id": node.parent, "depth": node.depth, "position": position,
                          "name": node.name, "description": node.description, "boundary": node.boundary,
                          "decision_rule": node.decision_rule, "keywords": json.dumps(node.keywords)})
        member_rows.extend({"node_id": node.id, "service_id": s} for s in dict.fromkeys(node.services))
    load_temp_table(con, "_nodes", _NODE_COLUMNS, node_rows)
    con.execute("INSERT INTO tree_nodes SELECT ?, node_id, parent_id, depth, position, name, description, boundary,"
                " decision_rule, keywords::JSON FROM _nodes", [build_id])
    load_temp_table(con, "_members", {"node_id": "VARCHAR", "service_id": "VARCHAR"}, member_rows)
    con.execute("INSERT INTO tree_membership SELECT ?, node_id, service_id FROM _members", [build_id])


_NODE_COLUMNS = {"node_id": "VARCHAR", "parent_id": "VARCHAR", "depth": "INTEGER", "position": "INTEGER",
                 "name": "VARCHAR", "description": "VARCHAR", "boundary": "VARCHAR", "decision_rule": "VARCHAR",
                 "keywords": "VARCHAR"}


def load_tree(con: duckdb.DuckDBPyConnection, build_id: int) -> Tree:
    record = get_build(con, build_id)
    rows = con.execute(
        "SELECT node_id, parent_id, depth, position, name, description, boundary, decision_rule, keywords"
        " FROM tree_nodes WHERE build_id = ? ORDER BY depth, parent_id, position", [build_id]
    ).fetchall()
    if not rows:
        raise UserError(f"tree {build_id} has no nodes (status: {record.status})",
                        hint="only completed builds can be searched; see `a2x-local tree list`")
    nodes: dict[str, TreeNode] = {}
    root_id = None
    for node_id, parent, depth, _position, name, description, boundary, rule, keywords in rows:
        nodes[node_id] = TreeNode(node_id, parent, depth, name, description, boundary, rule,
                                  json.loads(keywords) if keywords else [])
        if parent is None:
            root_id = node_id
        else:
            nodes[parent].children.append(node_id)
    for node_id, service_id in con.execute(
        "SELECT node_id, service_id FROM tree_membership WHERE build_id = ? ORDER BY node_id, service_id",
        [build_id],
    ).fetchall():
        nodes[node_id].services.append(service_id)
    return Tree(nodes=nodes, registry_fingerprint=record.registry_fingerprint, build_id=build_id,
                root_id=root_id or "root")


def active_build_id(con: duckdb.DuckDBPyConnection) -> int | None:
    row = con.execute("SELECT build_id FROM active_tree").fetchone()
    return int(row[0]) if row else None


def activate(con: duckdb.DuckDBPyConnection, build_id: int) -> None:
    """Make a completed tree the one searches use (a single-row swap: atomic for every reader)."""
    record = get_build(con, build_id)
    if record.status != "completed":
        raise UserError(f"tree {build_id} is {record.status}; only a completed tree can be active",
                        hint="`a2x-local tree list` shows each tree's status; finish an interrupted build with"
                             " `a2x-local build --resume`")
    con.execute("INSERT OR REPLACE INTO active_tree VALUES (TRUE, ?, now())", [build_id])


def load_active_tree(con: duckdb.DuckDBPyConnection) -> Tree:
    build_id = active_build_id(con)
    if build_id is None:
        raise UserError("no active tree in this registry",
                        hint="build one with `a2x-local build --model ALIAS` or load one with `a2x-local tree import`")
    return load_tree(con, build_id)


def delete_build(con: duckdb.DuckDBPyConnection, build_id: int, *, force: bool = False) -> None:
    """Remove a tree and everything recorded with it; the active tree only with ``force``."""
    get_build(con, build_id)
    if active_build_id(con) == build_id and not force:
        raise UserError(f"tree {build_id} is the active tree",
                        hint="activate another tree first, or pass --force to leave none active")
    with transaction(con):
        for table in ("tree_nodes", "tree_membership", "build_usage", "build_checkpoints"):
            con.execute(f"DELETE FROM {table} WHERE build_id = ?", [build_id])
        con.execute("DELETE FROM active_tree WHERE build_id = ?", [build_id])
        con.execute("DELETE FROM builds WHERE id = ?", [build_id])


def save_usage(con: duckdb.DuckDBPyConnection, build_id: int, usage: Usage) -> None:
    con.execute("DELETE FROM build_usage WHERE build_id = ?", [build_id])
    if not usage.by_label:
        return
    con.executemany(
        "INSERT INTO build_usage (build_id, call_type, calls, prompt_tokens, completion_tokens, failures, retries,"
        " seconds, cached, cached_prompt_tokens, cached_completion_tokens) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [[build_id, label, s.calls, s.prompt_tokens, s.completion_tokens, s.failures, s.retries, s.seconds, s.cached,
          s.cached_prompt_tokens, s.cached_completion_tokens] for label, s in sorted(usage.by_label.items())],
    )


def load_usage(con: duckdb.DuckDBPyConnection, build_id: int) -> Usage:
    usage = Usage(rounds=get_build(con, build_id).rounds)
    for label, calls, prompt, completion, failures, retries, seconds, cached, cached_prompt, cached_completion in (
        con.execute("SELECT call_type, calls, prompt_tokens, completion_tokens, failures, retries, seconds, cached,"
                    " cached_prompt_tokens, cached_completion_tokens FROM build_usage WHERE build_id = ?",
                    [build_id]).fetchall()):
        usage.record(label, calls=calls, prompt_tokens=prompt, completion_tokens=completion, failures=failures,
                     retries=retries, seconds=seconds, cached=cached, cached_prompt_tokens=cached_prompt,
                     cached_completion_tokens=cached_completion)
    return usage


def save_checkpoint(con: duckdb.DuckDBPyConnection, build_id: int, round_no: int, stage: str,
                    state: dict[str, Any]) -> None:
    con.execute("INSERT OR REPLACE INTO build_checkpoints VALUES (?, ?, ?, ?, now())",
                [build_id, round_no, stage, json.dumps(state)])


def latest_checkpoint(con: duckdb.DuckDBPyConnection, build_id: int) -> tuple[int, str, dict[str, Any]] | None:
    row = con.execute(
        "SELECT round, stage, state FROM build_checkpoints WHERE build_id = ? ORDER BY round DESC LIMIT 1",
        [build_id],
    ).fetchone()
    return (row[0], row[1], json.loads(row[2])) if row else None


def prune_checkpoints(con: duckdb.DuckDBPyConnection, build_id: int, *, keep_round: int | None) -> None:
    """Drop checkpoints before ``keep_round`` (every one when None): only the latest is ever resumed from."""
    if keep_round is None:
        con.execute("DELETE FROM build_checkpoints WHERE build_id = ?", [build_id])
    else:
        con.execute("DELETE FROM build_checkpoints WHERE build_id = ? AND round < ?", [build_id, keep_round])


def save_completed(con: duckdb.DuckDBPyConnection, tree: Tree, *, kind: str, fingerprint: str,
                   stats: dict[str, Any], make_active: bool, usage: Usage | None = None,
                   finished: dict[str, Any] | None = None, **record: Any) -> int:
    """Store ``tree`` as a completed build of ``kind`` in one transaction (record, tree, usage, stats, activation:
    all or nothing) and return its id; the tree learns its id and fingerprint. An import and a derived version
    (placement, re-split) are stored this way; ``record`` takes `create_build`'s other columns, ``finished``
    `update_build`'s (rounds, wall seconds)."""
    report = {"tree": tree.stats().to_dict(), "one_level": not tree.root.children, **stats}
    if usage is not None:
        report["usage"] = usage.to_dict()
    with transaction(con):
        build_id = create_build(con, kind=kind, registry_fingerprint=fingerprint,
                                service_count=len(tree.service_ids()), status="completed", **record)
        save_tree(con, build_id, tree)
        if usage is not None:
            save_usage(con, build_id, usage)
        update_build(con, build_id, finished_at=datetime.now(), stats=report, **(finished or {}))
        if make_active:
            activate(con, build_id)
    tree.build_id = build_id
    tree.registry_fingerprint = fingerprint
    return build_id
