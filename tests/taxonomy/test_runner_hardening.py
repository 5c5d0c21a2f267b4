"""Builds under a hostile environment: a database another process holds past the wait, a disk that fills at a
checkpoint, a killed process, a registry that changes mid-build. Finished rounds are never thrown away, a dead
build reads as interrupted and resumes, and a tree built on a changed registry says so."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import duckdb
import pytest

from a2x_local.db import connect, transaction
from a2x_local.errors import UserError
from a2x_local.registry import Registry
from a2x_local.settings import load_settings
from a2x_local.taxonomy import store
from a2x_local.taxonomy.induction.runner import run_build
from a2x_local.taxonomy.induction.spill import spill_path
from a2x_local.testing import ScriptedEngine, WordPolicy
from tests.support.paths import ROOT
from tests.support.processes import python_command, tree_env
from tests.support.registries import make_registry, toolret_services
from tests.taxonomy.helpers import small_config, synthetic

# ~150 real services, two levels, a dozen rounds (the keyword path included).
CONFIG = small_config(max_depth=2, keyword_path_min_services=100)
SERVICES = toolret_services()[::12]

_HOLDER = """
import sys, time, duckdb
con = duckdb.connect(sys.argv[1])
open(sys.argv[2], "w").write("held")
time.sleep(float(sys.argv[3]))
con.close()
"""


class Killed(BaseException):
    """The process dying: nothing in the build catches it."""


class Scripted:
    """The word-policy engine with a hook before round ``at`` (1-based)."""

    def __init__(self, at: int | None = None, hook=None) -> None:
        def before_round(round_number: int) -> None:
            if round_number == at:
                hook()

        self.engine = ScriptedEngine(WordPolicy(SERVICES), before_round=before_round)

    @property
    def rounds(self) -> int:
        return len(self.engine.batches)


def build(db: Path, scripted: Scripted | None = None, **kwargs):
    scripted = scripted or Scripted()
    # The database waits are [registry] settings, as every command reads them.
    waits = {key: kwargs.pop(key) for key in ("lock_timeout_s", "checkpoint_wait_s") if key in kwargs}
    settings = load_settings(db=db).with_overrides("registry", **waits)
    return run_build(settings, lambda: scripted.engine, config=CONFIG, model="scripted-word", **kwargs), scripted


def tree_rows(db: Path, build_id: int) -> tuple:
    with connect(db) as con:
        return (con.execute("SELECT node_id, parent_id, name FROM tree_nodes WHERE build_id = ? ORDER BY node_id",
                            [build_id]).fetchall(),
                con.execute("SELECT node_id, service_id FROM tree_membership WHERE build_id = ?"
                            " ORDER BY node_id, service_id", [build_id]).fetchall())


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    folder = tmp_path_factory.mktemp("reference")
    registry = make_registry(folder / "registry.duckdb", SERVICES)
    built = Path(shutil.copy(registry, folder / "built.duckdb"))
    outcome, scripted = build(built)
    assert scripted.rounds >= 6
    return registry, tree_rows(built, outcome.build_id), scripted.rounds


def hold_database(db: Path, seconds: float, marker: Path) -> subprocess.Popen:
    """Another process opens the database and keeps it for ``seconds``; returns once it holds it."""
    child = subprocess.Popen(python_command(_HOLDER, str(db), str(marker), str(seconds)), env=tree_env(), cwd=ROOT)
    deadline = time.monotonic() + 60
    while not marker.exists():
        assert child.poll() is None and time.monotonic() < deadline, "the holder never opened the database"
        time.sleep(0.05)
    return child


def test_a_checkpoint_waits_for_a_busy_database_and_loses_nothing(tmp_path, reference):
    registry, rows, rounds = reference
    db = Path(shutil.copy(registry, tmp_path / "r.duckdb"))
    holders = []
    scripted = Scripted(at=3, hook=lambda: holders.append(hold_database(db, 3.0, tmp_path / "held")))
    # The old behaviour: a command's short wait (here 0.5 s) also bounded checkpoints, and the build died.
    outcome, _ = build(db, scripted, lock_timeout_s=0.5)
    for holder in holders:
        holder.wait()
    assert holders and outcome.active
    assert tree_rows(db, outcome.build_id) == rows and scripted.rounds == rounds


def test_a_round_the_database_will_not_take_is_kept_and_resumed(tmp_path, reference, cli):
    registry, rows, rounds = reference
    db = Path(shutil.copy(registry, tmp_path / "r.duckdb"))
    holders = []
    scripted = Scripted(at=4, hook=lambda: holders.append(hold_database(db, 4.0, tmp_path / "held")))
    with pytest.raises(UserError, match="round 4 could not be saved") as caught:
        build(db, scripted, lock_timeout_s=0.2, checkpoint_wait_s=0.5)
    assert caught.value.code == "DatabaseBusyError" and "--resume" in caught.value.hint
    kept = spill_path(db, 1)
    assert str(kept) in caught.value.hint and kept.is_file()
    for holder in holders:
        holder.wait()
    listed = cli("tree", "list", "--json", "--db", db, db=False)
    assert [r["status"] for r in listed.json()] == ["interrupted"]   # no process holds its lock any more
    outcome, resumed = build(db, resume=True)
    assert outcome.resumed and outcome.build_id == 1
    assert resumed.rounds == rounds - 4                              # round 4 came from the kept file
    assert tree_rows(db, 1) == rows and not kept.exists()


def test_a_full_disk_at_a_checkpoint_is_explained_and_resumable(tmp_path, reference, monkeypatch):
    registry, rows, rounds = reference
    db = Path(shutil.copy(registry, tmp_path / "r.duckdb"))
    real = store.save_checkpoint

    def full(con, build_id, round_no, stage, state):
        if round_no == 2:
            raise duckdb.IOException(f'Could not write file "{db}.wal": No space left on device')
        return real(con, build_id, round_no, stage, state)

    monkeypatch.setattr(store, "save_checkpoint", full)
    with pytest.raises(UserError, match="no space left") as caught:
        build(db)
    assert caught.value.code == "DiskFullError" and spill_path(db, 1).is_file()
    monkeypatch.setattr(store, "save_checkpoint", real)
    outcome, resumed = build(db, resume=True)
    assert resumed.rounds == rounds - 2 and tree_rows(db, outcome.build_id) == rows


def test_a_killed_build_reads_as_interrupted_and_resumes(tmp_path, reference, cli):
    registry, rows, rounds = reference
    db = Path(shutil.copy(registry, tmp_path / "r.duckdb"))

    def die():
        raise Killed

    with pytest.raises(Killed):
        build(db, Scripted(at=5, hook=die))
    with connect(db) as con:
        assert con.execute("SELECT status FROM builds").fetchone()[0] == "running"   # what the process left
    shown = cli("tree", "list", "--json", "--db", db, db=False).json()
    assert [r["status"] for r in shown] == ["interrupted"]
    outcome, resumed = build(db, resume=True)
    assert resumed.rounds == rounds - 4 and tree_rows(db, outcome.build_id) == rows


def change_registry(db: Path, *, add=(), remove=()) -> None:
    with connect(db) as con, transaction(con):
        registry = Registry(con)
        if add:
            registry.insert(list(add))
        if remove:
            registry.remove(list(remove))


def test_services_added_during_a_build_leave_it_active_with_a_note(tmp_path, reference):
    registry, _, _ = reference
    db = Path(shutil.copy(registry, tmp_path / "r.duckdb"))
    added = synthetic(["late"], 2)
    outcome, _ = build(db, Scripted(at=3, hook=lambda: change_registry(db, add=added)))
    assert outcome.active
    assert any("changed while the tree was built" in note and "2 service(s) are not placed" in note
               for note in outcome.notes)
    with connect(db) as con:
        assert store.active_build_id(con) == outcome.build_id
        assert store.get_build(con, outcome.build_id).stats["warnings"] == outcome.notes[-1:]


def test_a_build_whose_services_were_removed_meanwhile_is_not_activated(tmp_path, reference, cli):
    registry, _, _ = reference
    db = Path(shutil.copy(registry, tmp_path / "r.duckdb"))
    first, _ = build(db)
    gone = SERVICES[3].id
    outcome, _ = build(db, Scripted(at=2, hook=lambda: change_registry(db, remove=[gone])))
    assert not outcome.active and outcome.build_id != first.build_id
    assert "NOT activated" in outcome.notes[-1] and repr(gone) in outcome.notes[-1]
    with connect(db) as con:
        assert store.active_build_id(con) == first.build_id          # the previous tree keeps serving
        assert store.get_build(con, outcome.build_id).status == "completed"


def test_cli_build_json_says_whether_the_tree_became_active(tmp_path, reference, cli, use_engine):
    registry, _, _ = reference
    db = Path(shutil.copy(registry, tmp_path / "r.duckdb"))
    scripted = Scripted(at=2, hook=lambda: change_registry(db, remove=[SERVICES[5].id]))
    use_engine("scripted", lambda config: scripted.engine)
    flags = ["--leaf-size", "15", "--max-depth", "2", "--max-children", "8", "--keyword-threshold", "100",
             "--keyword-merge", "stem"]
    result = cli("build", "--engine", "scripted", "--model", "scripted-word", *flags, "--json", "--db", db, db=False)
    assert result.code == 0, result.err
    data = result.json()
    assert data["active"] is False and "NOT activated" in data["notes"][-1]
