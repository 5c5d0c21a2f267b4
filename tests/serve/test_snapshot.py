"""Snapshots of the registry: read through a short read-only connection, detected as stale by one stat."""

from __future__ import annotations

import pytest

from a2x_local.db import connect, transaction
from a2x_local.errors import UserError
from a2x_local.serve.snapshot import FileStamp, read_identity, read_only, read_snapshot
from a2x_local.taxonomy import store
from tests.serve.helpers import registry_with_trees


def test_a_snapshot_holds_services_tree_and_placements(db_path):
    active, _ = registry_with_trees(db_path)
    with read_only(db_path, wait_s=1) as con:
        snapshot = read_snapshot(con, generation=3)
    assert snapshot.generation == 3 and snapshot.build_id == active and not snapshot.tree_is_stale
    assert snapshot.placements["f1"] == ["root/1/1", "root/3/2"] and "x1" not in snapshot.placements
    assert len(snapshot.services) == 19


def test_reading_leaves_the_file_alone_and_a_write_is_seen(db_path):
    _, other = registry_with_trees(db_path)
    before = FileStamp.of(db_path)
    with read_only(db_path, wait_s=1) as con:
        identity = read_identity(con)
    assert FileStamp.of(db_path) == before  # a reader never looks like a change
    with connect(db_path) as con, transaction(con):
        store.activate(con, other)
    assert FileStamp.of(db_path) != before
    with read_only(db_path, wait_s=1) as con:
        assert read_identity(con).build_id == other != identity.build_id


def test_a_missing_registry_is_a_clear_error(tmp_path):
    with pytest.raises(UserError, match="no registry database") as info, read_only(tmp_path / "none.duckdb", wait_s=0):
        pass
    assert "ingest" in info.value.hint and not (tmp_path / "none.duckdb").exists()
