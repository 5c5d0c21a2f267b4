"""Builds against a real DuckDB file: storage, activation, failures, kill-and-resume, the build lock."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest

from a2x_local.db import connect
from a2x_local.errors import BuildRunningError, UserError
from a2x_local.registry.store import Registry
from a2x_local.settings import load_settings
from a2x_local.taxonomy import store
from a2x_local.taxonomy.induction.runner import run_build
from a2x_local.taxonomy.lock import BuildLock
from a2x_local.taxonomy.prompts import prompt_hash
from a2x_local.testing import ScriptedEngine, WordPolicy
from tests.support.paths import ROOT
from tests.support.processes import python_command, tree_env
from tests.support.registries import make_registry
from tests.taxonomy.helpers import small_config, synthetic
from tests.taxonomy.rules import DomainRule

# Two levels are enough for storage and resume; the algorithm tests cover depth three.
RUNNER = small_config(max_depth=2)


class Killed(BaseException):
    """Stands in for the process dying: nothing in the build catches it."""


def engine_for(services, *, fail_at: int | None = None, error: type[BaseException] = Killed):
    policy = WordPolicy(services)
    def before_round(round_number: int) -> None:
        if round_number == fail_at:
            raise error(f"stopped at round {fail_at}")

    return ScriptedEngine(policy, before_round=before_round)


def build(db_path, services, *, config=None, engine=None, resume=False, model="scripted-word"):
    engine = engine or engine_for(services)
    return run_build(load_settings(db=db_path), lambda: engine, config=config or RUNNER, model=model,
                     resume=resume), engine


def rows(db_path, build_id):
    with connect(db_path) as con:
        nodes = con.execute("SELECT node_id, parent_id, depth, position, name, description FROM tree_nodes"
                            " WHERE build_id = ? ORDER BY node_id", [build_id]).fetchall()
        members = con.execute("SELECT node_id, service_id FROM tree_membership WHERE build_id = ?"
                              " ORDER BY node_id, service_id", [build_id]).fetchall()
    return nodes, members


@dataclass
class Reference:
    registry: Path        # a database holding only the registry
    built: Path           # the same after one uninterrupted build
    rows: tuple
    rounds: int
    outcome: object
    engine: ScriptedEngine

    def copy(self, which: Path, tmp_path: Path) -> Path:
        return Path(shutil.copy(which, tmp_path / "r.duckdb"))


@pytest.fixture(scope="module")
def reference(tmp_path_factory, toolret_subset):
    """One uninterrupted build (copied by the tests that need a database with a tree, to keep the suite fast)."""
    folder = tmp_path_factory.mktemp("ref")
    registry = make_registry(folder / "registry.duckdb", toolret_subset)
    built = Path(shutil.copy(registry, folder / "built.duckdb"))
    outcome, engine = build(built, toolret_subset)
    return Reference(registry, built, rows(built, outcome.build_id), len(engine.batches), outcome, engine)


def test_a_completed_build_is_stored_recorded_and_active(reference, toolret_subset):
    db, outcome, engine = reference.built, reference.outcome, reference.engine
    with connect(db) as con:
        record = store.get_build(con, outcome.build_id)
        assert record.status == "completed" and record.active and record.kind == "build"
        assert record.prompt_hash == prompt_hash() and record.model == "scripted-word"
        assert record.registry_fingerprint == Registry(con).fingerprint()
        assert record.thresholds["leaf_max_services"] == 15 and record.engine_settings["engine"] == "scripted"
        assert record.rounds == engine.usage.rounds == len(engine.batches) >= 10
        assert record.stats["tree"]["services"] == len(toolret_subset)
        loaded = store.load_tree(con, outcome.build_id)
        usage = store.load_usage(con, outcome.build_id)
        assert con.execute("SELECT count(*) FROM build_checkpoints").fetchone()[0] == 0
    assert loaded.service_ids() == {s.id for s in toolret_subset}
    assert usage.total().prompt_tokens == engine.usage.total().prompt_tokens > 0
    assert set(usage.by_label) >= {"keywords", "design_keywords", "design_descriptions", "assign", "refine"}


@pytest.mark.parametrize("kill_at", [1, 4, 9])
def test_kill_and_resume_gives_the_same_tree_without_redoing_rounds(tmp_path, toolret_subset, reference,
                                                                    kill_at):
    (ref_nodes, ref_members), ref_rounds = reference.rows, reference.rounds
    db = reference.copy(reference.registry, tmp_path)
    with pytest.raises(Killed):
        build(db, toolret_subset, engine=engine_for(toolret_subset, fail_at=kill_at))
    with connect(db) as con:
        [record] = store.list_builds(con)
        assert record.status == "interrupted" and not record.active     # the process "died" mid-build
        assert store.active_build_id(con) is None
    if kill_at == 1:
        with pytest.raises(UserError, match="before its first round"):
            build(db, toolret_subset, resume=True)
        return
    outcome, engine = build(db, toolret_subset, resume=True)
    assert outcome.resumed and outcome.build_id == record.id
    assert len(engine.batches) == ref_rounds - (kill_at - 1)       # finished rounds are not redone
    assert rows(db, outcome.build_id) == (ref_nodes, ref_members)
    with connect(db) as con:
        assert store.get_build(con, outcome.build_id).rounds == ref_rounds


def test_an_engine_failure_records_a_failed_build_and_leaves_the_active_tree(tmp_path, toolret_subset,
                                                                            reference):
    db = reference.copy(reference.built, tmp_path)
    first = reference.outcome
    with pytest.raises(UserError, match="engine failed during the build: RuntimeError: stopped at round 3"):
        build(db, toolret_subset, engine=engine_for(toolret_subset, fail_at=3, error=RuntimeError))
    with connect(db) as con:
        records = store.list_builds(con)
        assert records[-1].status == "failed" and "RuntimeError" in records[-1].error
        assert store.active_build_id(con) == first.build_id
    # The failed build resumes from its last checkpoint once the cause is fixed.
    outcome, _ = build(db, toolret_subset, resume=True)
    assert outcome.build_id == records[-1].id
    with connect(db) as con:
        assert store.active_build_id(con) == outcome.build_id


def test_answers_that_stay_invalid_fail_the_build_clearly(tmp_path):
    services = synthetic(["weather", "travel"], 20)
    db = make_registry(tmp_path / "r.duckdb", services)
    engine = ScriptedEngine(lambda request: "{}")
    with pytest.raises(UserError, match="1 of 1 design answers stayed invalid after the retry"):
        build(db, services, engine=engine, config=small_config(keyword_path_min_services=1000))
    with connect(db) as con:
        [record] = store.list_builds(con)
        assert record.status == "failed" and "stayed invalid" in record.error
        assert store.active_build_id(con) is None


def test_a_model_that_fails_to_load_is_recorded_as_failed(tmp_path):
    services = synthetic(["weather"], 50)
    db = make_registry(tmp_path / "r.duckdb", services)

    def load():
        raise OSError("no such file: model.safetensors")

    with pytest.raises(UserError, match="model failed to load: OSError"):
        run_build(load_settings(db=db), load, config=small_config(), model="missing")
    with connect(db) as con:
        [record] = store.list_builds(con)
        assert record.status == "failed" and "model.safetensors" in record.error


def test_an_empty_registry_is_a_clear_error(tmp_path):
    db = make_registry(tmp_path / "r.duckdb", [])
    with pytest.raises(UserError, match="the registry is empty") as caught:
        build(db, [], engine=ScriptedEngine(DomainRule()))
    assert "ingest" in caught.value.hint
    with connect(db) as con:
        assert [r.status for r in store.list_builds(con)] == ["failed"]


def test_a_small_registry_gives_a_one_level_tree_and_says_so(tmp_path):
    services = synthetic(["weather"], 6)
    db = make_registry(tmp_path / "r.duckdb", services)
    outcome, engine = build(db, services, engine=ScriptedEngine(DomainRule()))
    assert outcome.report["one_level"] and "single node" in outcome.notes[0]
    assert engine.usage.rounds == 0 and outcome.tree.root.services == sorted(s.id for s in services)


def test_a_second_concurrent_build_is_refused(tmp_path):
    services = synthetic(["weather"], 6)
    db = make_registry(tmp_path / "r.duckdb", services)
    with BuildLock(db), pytest.raises(BuildRunningError, match="another build is already running"):
        build(db, services, engine=ScriptedEngine(DomainRule()))
    with connect(db) as con:
        assert store.list_builds(con) == []          # refused before anything was recorded


def test_the_database_stays_usable_while_the_model_works(tmp_path):
    services = synthetic(["weather", "travel"], 20)
    db = make_registry(tmp_path / "r.duckdb", services)
    seen = []
    rule = DomainRule()

    def answer(request):
        # Another process's command (a search, `tree list`) opens the file while a round is in flight.
        con = duckdb.connect(str(db))
        seen.append(con.execute("SELECT count(*) FROM services").fetchone()[0])
        con.close()
        return rule(request)

    build(db, services, engine=ScriptedEngine(answer),
          config=small_config(keyword_path_min_services=1000, leaf_max_services=25))
    assert seen and set(seen) == {40}


def test_resume_insists_on_the_same_model_settings_and_registry(tmp_path, toolret_subset, reference):
    db = reference.copy(reference.registry, tmp_path)
    with pytest.raises(Killed):
        build(db, toolret_subset, engine=engine_for(toolret_subset, fail_at=3))
    with pytest.raises(UserError, match="different model 'scripted-word'"):
        build(db, toolret_subset, resume=True, model="other")
    with pytest.raises(UserError, match="leaf_max_services=15 \\(now 20\\)"):
        build(db, toolret_subset, resume=True, config=small_config(max_depth=2, leaf_max_services=20))
    with connect(db) as con:
        Registry(con).insert(synthetic(["extra"], 1))
    with pytest.raises(UserError, match="the registry"):
        build(db, toolret_subset, resume=True)


def test_resume_knows_a_model_by_what_its_name_resolves_to(tmp_path, toolret_subset, reference, monkeypatch):
    """An alias and the folder it names are one model; the same folder with other weights is not (issue 35)."""
    folder = tmp_path / "models" / "mini"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text('{"model_type": "qwen2"}', encoding="utf-8")
    (folder / "model.safetensors").write_bytes(b"weights")
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(f'[models.mini]\npath = "{folder.as_posix()}"\n', encoding="utf-8")
    monkeypatch.setenv("A2X_HOME", str(home))
    db = reference.copy(reference.registry, tmp_path)
    with pytest.raises(Killed):
        build(db, toolret_subset, engine=engine_for(toolret_subset, fail_at=3), model="mini")
    weights = folder / "model.safetensors"
    started = weights.stat()
    weights.write_bytes(b"other weights")     # the same folder and name over other weights
    with pytest.raises(UserError, match="different model 'mini'"):
        build(db, toolret_subset, resume=True, model=str(folder))
    with pytest.raises(UserError, match="its files changed"):
        build(db, toolret_subset, resume=True, model="mini")
    weights.write_bytes(b"weights")
    os.utime(weights, ns=(started.st_atime_ns, started.st_mtime_ns))
    outcome, _ = build(db, toolret_subset, resume=True, model=str(folder))   # the alias's folder, by its path
    assert outcome.resumed


def test_resume_without_an_unfinished_build_says_so(tmp_path):
    services = synthetic(["weather"], 6)
    db = make_registry(tmp_path / "r.duckdb", services)
    with pytest.raises(UserError, match="no build to resume"):
        build(db, services, resume=True)
    build(db, services, engine=ScriptedEngine(DomainRule()))
    with pytest.raises(UserError, match="is completed"):
        build(db, services, resume=True)


_CHILD = """
import json, sys, time
from pathlib import Path
from a2x_local.testing import ScriptedEngine
from a2x_local.registry.types import Service
from a2x_local.settings import load_settings
from a2x_local.taxonomy.induction.runner import run_build
from a2x_local.testing import WordPolicy
from a2x_local.testing import WordPolicy
from tests.taxonomy.test_runner import RUNNER

db, marker, services_file, stop_at = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4])
services = [Service(**s) for s in json.loads(services_file.read_text())]

def before_round(round_number):
    if round_number == stop_at:
        marker.write_text("waiting")          # the parent kills us here, mid-round
        time.sleep(600)

engine = ScriptedEngine(WordPolicy(services), before_round=before_round)
run_build(load_settings(db=db), lambda: engine, config=RUNNER, model="scripted-word")
"""


def test_a_build_killed_with_sigkill_releases_the_lock_and_resumes(tmp_path, toolret_subset, reference):
    db = reference.copy(reference.registry, tmp_path)
    marker = tmp_path / "marker"
    services_file = tmp_path / "services.json"
    services_file.write_text(json.dumps([{"id": s.id, "type": s.type, "name": s.name,
                                          "description": s.description} for s in toolret_subset]))
    child = subprocess.Popen(python_command(_CHILD, str(db), str(marker), str(services_file), "6"), cwd=ROOT,
                             env=tree_env())
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            assert child.poll() is None, "the child build ended early"
            assert time.monotonic() < deadline, "the child build never reached round 6"
            time.sleep(0.1)
        with pytest.raises(BuildRunningError):
            build(db, toolret_subset)                      # refused while the child holds the lock
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    outcome, engine = build(db, toolret_subset, resume=True)
    assert len(engine.batches) == reference.rounds - 5
    assert rows(db, outcome.build_id) == reference.rows


def test_a_chinese_registry_gets_categories_named_in_chinese_and_the_record_says_so(tmp_path):
    from a2x_local.registry import Service
    from tests.support.registries import make_registry
    from tests.taxonomy.helpers import Recorder, small_config
    from tests.taxonomy.rules import DomainRule

    names = {"weather": "天气预报", "travel": "旅行预订"}
    services = [Service(f"{domain}_{i:02d}", "generic", f"{label}工具{i}", f"提供{label}相关的查询和服务，编号{i}。")
                for domain, label in names.items() for i in range(20)]
    db = make_registry(tmp_path / "zh.duckdb", services)
    recorder = Recorder(DomainRule())
    outcome = run_build(load_settings(db=db), lambda: ScriptedEngine(recorder),
                        config=small_config(leaf_max_services=25, keyword_path_min_services=1000), model="scripted")
    with connect(db) as con:
        assert store.get_build(con, outcome.build_id).thresholds["category_language"] == "Chinese"
    designs = recorder.of("design")
    assert designs and all("in Chinese, the language of the registry's services" in r.messages[0]["content"]
                           for r in designs)
