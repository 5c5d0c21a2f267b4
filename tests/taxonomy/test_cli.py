"""`a2x-local build` and `a2x-local tree ...` through the real CLI entry point, with a scripted engine."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from a2x_local.cli import output
from a2x_local.db import connect
from a2x_local.errors import UserError
from a2x_local.settings import load_settings
from a2x_local.taxonomy import store
from a2x_local.taxonomy.induction.runner import run_build
from a2x_local.taxonomy.lock import BuildLock
from a2x_local.testing import ScriptedEngine, WordPolicy
from tests.support.registries import make_registry
from tests.taxonomy.helpers import small_config, synthetic

SCRIPTED = ["--engine", "scripted"]   # the engine the `scripted_engine` fixture registers
SMALL = ["--leaf-size", "15", "--max-children", "8", "--keyword-threshold", "150", "--keyword-merge", "stem"]


@pytest.fixture
def scripted_engine(use_engine, toolret_subset):
    """`--engine scripted` answers with the word policy instead of loading a model; returns the engine settings of
    every start."""
    policy = WordPolicy([*toolret_subset, *synthetic(["weather"], 6)])
    return use_engine("scripted", lambda config: ScriptedEngine(policy))


@pytest.fixture(scope="module")
def template(tmp_path_factory, toolret_subset):
    """A database with one completed build (built once per module; tests work on copies)."""
    db = make_registry(tmp_path_factory.mktemp("cli") / "template.duckdb", toolret_subset)
    config = small_config(max_children=8)
    outcome = run_build(load_settings(db=db), lambda: ScriptedEngine(WordPolicy(toolret_subset)), config=config,
                        model="scripted")
    return db, {"build": outcome.build_id, "active": True, "resumed": False, "stats": outcome.report}


@pytest.fixture
def built(template, db_path):
    shutil.copy(template[0], db_path)
    return template[1]


def test_build_json_reports_rounds_tokens_and_shape(cli, db_path, toolret_subset, scripted_engine, template):
    make_registry(db_path, toolret_subset)
    # --no-cache: every step goes to the model (with the cache, a prompt repeated within the build is not re-sent).
    result = cli("build", *SCRIPTED, "--model", "scripted", *SMALL, "--no-cache", "--json")
    assert result.code == 0, result.err
    built = result.json()
    assert built["active"] and built["build"] == 1 and not built["resumed"]
    stats = built["stats"]
    assert stats["tree"]["services"] == len(toolret_subset)
    assert stats["engine_rounds"] == len(stats["rounds"]) > 5
    assert stats["usage"]["by_call_type"]["assign"]["prompt_tokens"] > 0
    assert Path(scripted_engine[0].model).name == "scripted"       # the --model flag reached the engine
    # The flags set the same thresholds as the template's config: the same tree.
    assert stats["tree"] == template[1]["stats"]["tree"]


def test_build_summary_for_people_says_when_the_tree_is_one_node(cli, db_path, scripted_engine):
    make_registry(db_path, synthetic(["weather"], 6))
    result = cli("build", *SCRIPTED, "--model", "scripted")
    assert result.code == 0, result.err
    assert "engine rounds" in result.out and "Tree 1 built" in result.out
    assert "single node" in result.err


def test_build_resume_without_unfinished_build_exits_1(cli, built, scripted_engine):
    result = cli("build", *SCRIPTED, "--model", "scripted", *SMALL, "--resume")
    assert result.code == 1 and "nothing to resume" in result.err


def test_build_refused_while_another_runs(cli, db_path, toolret_subset, scripted_engine):
    make_registry(db_path, toolret_subset)
    with BuildLock(db_path):
        result = cli("build", *SCRIPTED, "--model", "scripted", *SMALL, "--json")
    assert result.code == 1 and "another build is already running" in result.err
    assert result.json()["error"] == "BuildRunningError"


def test_bad_threshold_and_empty_registry(cli, db_path, scripted_engine):
    assert cli("build", *SCRIPTED, "--model", "x", "--keyword-merge", "magic").code == 1
    assert cli("build", *SCRIPTED, "--model", "x", "--max-children", "1").code == 2
    make_registry(db_path, [])
    result = cli("build", *SCRIPTED, "--model", "x")
    assert result.code == 1 and "registry is empty" in result.err


def test_tree_list_show_stats(cli, built):
    listed = cli("tree", "list", "--json").json()
    assert [(t["id"], t["kind"], t["status"], t["active"]) for t in listed] == [(1, "build", "completed", True)]
    shown = cli("tree", "show", "--depth", "1", "--json").json()
    assert shown["id"] == "root" and len(shown["children"]) == built["stats"]["tree"]["root_fanout"]
    assert all("children" not in child for child in shown["children"])
    first = shown["children"][0]["id"]
    sub = cli("tree", "show", first, "--depth", "0", "--json").json()
    assert sub["id"] == first and sub["services"] == shown["children"][0]["services"]
    people = cli("tree", "show")
    assert people.code == 0 and shown["children"][0]["name"] in people.out
    stats = cli("tree", "stats", "--json").json()
    assert stats["tree"] == built["stats"]["tree"] and stats["engine_rounds"] == built["stats"]["engine_rounds"]
    assert stats["usage"]["by_call_type"]["assign"]["calls"] > 0 and not stats["stale"]
    assert "Model calls by call type" in cli("tree", "stats").out


def test_tree_show_unknown_node_and_no_active_tree(cli, db_path, built):
    result = cli("tree", "show", "root/99")
    assert result.code == 1 and "no node 'root/99'" in result.err
    assert cli("tree", "delete", "1", "--force").code == 0
    result = cli("tree", "show")
    assert result.code == 1 and "no active tree" in result.err


def test_export_import_round_trip_activate_delete(cli, tmp_path, built):
    out = tmp_path / "tree.json"
    assert cli("tree", "export", "--format", "json", "--out", out).code == 0
    exported = json.loads(out.read_text())
    assert exported["format"] == "a2x-tree" and exported["root"]["children"]
    dot = cli("tree", "export", "--format", "dot")
    assert dot.code == 0 and dot.out.startswith("digraph taxonomy {") and '"root" -> "root/1";' in dot.out
    assert cli("tree", "export", "--format", "xml").code == 2

    imported = cli("tree", "import", out, "--no-activate", "--json").json()
    assert imported["build"] == 2 and not imported["active"] and imported["warnings"] == []
    assert cli("tree", "list", "--json").json()[0]["active"]
    again = cli("tree", "export", "--id", "2", "--format", "json").json()
    assert again["root"] == exported["root"]

    assert cli("tree", "activate", "2").code == 0
    listed = cli("tree", "list", "--json").json()
    assert [t["kind"] for t in listed if t["active"]] == ["import"]
    refused = cli("tree", "delete", "2")
    assert refused.code == 1 and "active tree" in refused.err
    assert cli("tree", "delete", "1").code == 0
    assert cli("tree", "activate", "99").code == 1
    assert [t["id"] for t in cli("tree", "list", "--json").json()] == [2]


def test_tree_import_bad_files(cli, tmp_path, built):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    result = cli("tree", "import", bad)
    assert result.code == 1 and "not valid JSON" in result.err and "line 1" in result.err
    bad.write_text(json.dumps({"name": "Root", "description": "x", "services": ["nope"]}))
    result = cli("tree", "import", bad)
    assert result.code == 1 and "unknown service id" in result.err and "'nope'" in result.err
    result = cli("tree", "import", tmp_path / "missing.json")
    assert result.code == 1 and "file not found" in result.err
    assert len(cli("tree", "list", "--json").json()) == 1          # nothing half-written


def test_a_failed_build_keeps_the_active_tree(cli, db_path, built, use_engine):
    def broken(config):
        raise UserError("model 'nope' at /models/nope is not usable: config.json missing")

    use_engine("broken", broken)
    result = cli("build", "--engine", "broken", "--model", "nope", *SMALL)
    assert result.code == 1 and "is not usable: config.json missing" in result.err
    with connect(db_path) as con:
        records = store.list_builds(con)
        assert records[-1].status == "failed" and "config.json missing" in records[-1].error
        assert store.active_build_id(con) == built["build"]
    listing = cli("tree", "list")
    assert listing.code == 0 and "failed" in listing.out


def test_progress_shows_each_round_with_its_services_and_tokens(tmp_path):
    import io

    from rich.console import Console
    from rich.progress import Progress

    from tests.taxonomy.rules import DomainRule

    services = synthetic(["weather", "travel"], 20)
    db = make_registry(tmp_path / "r.duckdb", services)
    progress = Progress(console=Console(file=io.StringIO(), width=200))
    observer = output.RoundProgress(progress)
    with progress:
        run_build(load_settings(db=db), lambda: ScriptedEngine(DomainRule()),
                  config=small_config(leaf_max_services=25, keyword_path_min_services=1000), model="scripted",
                  observer=observer)
    descriptions = [task.description for task in progress.tasks]
    assert "level 0 · design · 40 services" in descriptions
    assert "level 0 · assign · 40 services" in descriptions
    assert all(task.completed == task.total for task in progress.tasks[1:])
    assert descriptions[0].startswith(f"rounds {observer.rounds} · prompt tokens") and observer.rounds >= 3
