"""Incremental placement (`run_update`, `tree update`), `tree diff` and rollback, with the scripted world model."""

from __future__ import annotations

import shutil

import pytest

from a2x_local.db import connect, transaction
from a2x_local.lifecycle import run_update
from a2x_local.registry import Registry, Service
from a2x_local.search import SearchRequest, make_method
from a2x_local.settings import load_settings
from a2x_local.taxonomy import (
    Tree,
    TreeNode,
    active_build_id,
    get_build,
    list_builds,
    load_active_tree,
    load_tree,
    save_import,
)
from a2x_local.taxonomy.induction.runner import run_build
from a2x_local.testing import ScriptedEngine
from tests.lifecycle.world import BASE, World, service, services, world_config, write_world_config
from tests.support.registries import make_registry

CONFIG = world_config()


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """A registry of 18 services and its built tree: Music, Travel, Weather, six services each."""
    db = make_registry(tmp_path_factory.mktemp("update") / "template.duckdb", services(BASE, 3))
    run_build(load_settings(db=db), lambda: ScriptedEngine(World()), config=CONFIG, model="scripted")
    return db


@pytest.fixture
def built(template, db_path, home):
    shutil.copy(template, db_path)
    write_world_config(home)
    return load_settings(db=db_path)


def change_registry(db_path) -> None:
    """Three new weather services (Weather grows past θ_leaf = 8), one new jazz one, one hotel removed, one flight
    rewritten."""
    with connect(db_path) as con, transaction(con):
        registry = Registry(con)
        registry.insert([service("weather", "hail", i) for i in range(3)] + [service("music", "jazz", 10)])
        registry.remove(["travel-hotel-0"])
        registry.update([service("travel", "flight", 1, variant=" faster")])


def test_new_services_are_placed_removed_ones_leave_and_full_leaves_are_split(built):
    change_registry(built.db_path)
    world = World()
    outcome = run_update(built, load_engine=lambda: ScriptedEngine(world), model="scripted", activate=False)
    assert outcome.changes.added == ["music-jazz-10", "weather-hail-0", "weather-hail-1", "weather-hail-2"]
    assert outcome.changes.removed == ["travel-hotel-0"] and outcome.changes.changed == ["travel-flight-1"]
    placed = {p.service: p.nodes for p in outcome.placements.values()}
    assert placed == {"music-jazz-10": ["root/1"], "weather-hail-0": ["root/3"], "weather-hail-1": ["root/3"],
                      "weather-hail-2": ["root/3"], "travel-flight-1": ["root/2"]}
    assert {p.how for p in outcome.placements.values()} == {"model descent"}
    assert outcome.overfull == [{"node": "root/3", "name": "Weather", "depth": 1, "services": 9, "splittable": True}]
    assert outcome.split == ["root/3"] and outcome.still_overfull == []
    # One descent request per service at the root (the level below is all leaves), all in one round.
    assert world.calls.count("descend") == 5 and "design" in world.calls
    tree = outcome.tree
    assert [tree.node(c).name for c in tree.node("root/3").children] == ["Hail", "Rain", "Snow"]
    assert tree.node("root/3/1").services == ["weather-hail-0", "weather-hail-1", "weather-hail-2"]
    with connect(built.db_path) as con:
        record = get_build(con, outcome.build_id)
        assert record.kind == "update" and record.parent_id == 1 and record.status == "completed"
        assert active_build_id(con) == 1 and not record.active            # the parent keeps serving
        assert record.stats["update"]["placement"] == "model descent"
        assert record.stats["update"]["changes"]["removed"] == ["travel-hotel-0"]
        assert record.registry_fingerprint == Registry(con).fingerprint() and record.prompt_hash
        stored = load_tree(con, outcome.build_id)
        assert stored.service_ids() == Registry(con).ids()
        assert {n.id: (n.name, sorted(n.services)) for n in stored.walk()} == {
            n.id: (n.name, sorted(n.services)) for n in tree.walk()}


def test_searches_on_the_updated_tree_find_the_new_services(built):
    with connect(built.db_path) as con, transaction(con):
        Registry(con).insert([service("weather", "hail", i) for i in range(2)])
    engine = ScriptedEngine(World())
    outcome = run_update(built, load_engine=lambda: engine, model="scripted")
    assert outcome.activated
    with connect(built.db_path) as con:
        assert active_build_id(con) == outcome.build_id
    method = make_method("a2x", built, engine=engine)
    [answer] = method.search_batch([SearchRequest("weather hail")])
    assert sorted(answer.ids) == ["weather-hail-0", "weather-hail-1"]   # in the pre-ranking's order
    # The tree before the update did not have them: searched directly, it finds nothing.
    with connect(built.db_path) as con:
        old = load_tree(con, 1)
    assert not {"weather-hail-0", "weather-hail-1"} & old.service_ids()


def test_a_service_the_model_files_nowhere_stays_at_the_root_with_a_note(built):
    with connect(built.db_path) as con, transaction(con):
        Registry(con).insert([Service("odd-lost-1", "generic", "lost thing", "Does lost things.")])
    outcome = run_update(built, load_engine=lambda: ScriptedEngine(World(lost=["lost"])), model="scripted")
    placement = outcome.placements["odd-lost-1"]
    assert placement.nodes == ["root"] and "chose none" in placement.note
    assert "odd-lost-1" in outcome.tree.node("root").services


def test_embedding_placement_needs_no_model_and_says_so(built):
    change_registry(built.db_path)
    outcome = run_update(built, load_engine=None, placement="embedding", activate=False)
    placed = {p.service: p.nodes for p in outcome.placements.values()}
    assert placed["weather-hail-0"] == ["root/3"] and placed["music-jazz-10"] == ["root/1"]
    assert all(p.how == "embedding similarity" and 0 < p.score <= 1 for p in outcome.placements.values())
    # Over-full Weather is listed, not split: that takes the model.
    assert outcome.split == [] and [x["node"] for x in outcome.still_overfull] == ["root/3"]
    assert any("re-splits them" in note for note in outcome.notes)
    with connect(built.db_path) as con:
        record = get_build(con, outcome.build_id)
    assert record.engine_settings["placement"] == "embedding similarity" and record.model is None
    assert record.stats["update"]["placed"][0]["how"] == "embedding similarity"


def test_nothing_to_update_makes_no_version(built):
    outcome = run_update(built, load_engine=lambda: pytest.fail("no model is needed"), model="scripted")
    assert outcome.build_id is None and "no new version" in outcome.notes[0]
    with connect(built.db_path) as con:
        assert [r.id for r in list_builds(con)] == [1]


def test_a_failing_model_stores_nothing_and_the_old_tree_keeps_serving(built):
    change_registry(built.db_path)

    def broken(request):
        raise RuntimeError("GPU fell off")

    with pytest.raises(RuntimeError):
        run_update(built, load_engine=lambda: ScriptedEngine(broken), model="scripted")
    with connect(built.db_path) as con:
        assert active_build_id(con) == 1 and load_active_tree(con).build_id == 1
        assert con.execute("SELECT count(*) FROM builds").fetchone()[0] == 1


def test_cli_update_diff_and_rollback(cli, built, use_engine):
    change_registry(built.db_path)
    use_engine("scripted", lambda config: ScriptedEngine(World()))
    result = cli("tree", "update", "--engine", "scripted", "--model", "scripted", "--no-activate", "--json")
    assert result.code == 0, result.err
    data = result.json()
    assert data["base"] == 1 and data["build"] == 2 and not data["activated"]
    assert data["placement"] == "model descent" and data["resplit"] == ["root/3"]
    assert {p["service"] for p in data["placed"]} >= {"weather-hail-0", "music-jazz-10"}

    diff = cli("tree", "diff", "1", "2", "--json").json()
    assert diff["services"]["appeared"] == ["music-jazz-10", "weather-hail-0", "weather-hail-1", "weather-hail-2"]
    assert diff["services"]["vanished"] == ["travel-hotel-0"]
    assert [c["path"] for c in diff["categories"]["added"]] == ["Weather › Hail", "Weather › Rain", "Weather › Snow"]
    moved = {m["service"]: m["to"] for m in diff["services"]["moved"]}
    assert moved["weather-rain-0"] == ["Weather › Rain"]
    table = cli("tree", "diff", "1", "2")
    assert table.code == 0 and "category added: Weather › Hail" in table.out

    assert cli("tree", "activate", "2").code == 0
    assert cli("tree", "list", "--json").json()[1]["active"]
    assert cli("tree", "activate", "1").code == 0                       # rollback
    trees = cli("tree", "list", "--json").json()
    assert trees[0]["active"] and trees[1]["parent_id"] == 1

    people = cli("tree", "update", "--placement", "embedding", "--no-activate")
    assert people.code == 0, people.err
    assert "embedding similarity" in people.out and "Tree 3 made from tree 1" in people.out
    assert cli("tree", "update", "--placement", "nearest").code == 2


def test_tree_diff_shows_category_names_escaped(cli, db_path):
    make_registry(db_path, services(BASE, 1))
    with connect(db_path) as con:
        for k, name in enumerate(["Rain", "Rain\x1b[2J"]):
            root = TreeNode("root", None, 0, "All", "Everything.", children=["root/1"])
            leaf = TreeNode("root/1", "root", 1, name, "Rain.", services=["weather-rain-0"])
            save_import(con, Tree({"root": root, "root/1": leaf}), fingerprint="fp", source=f"t{k}",
                        activate=k == 0, warnings=[])
    result = cli("tree", "diff", "1", "2")
    assert result.code == 0, result.err
    assert "\x1b" not in result.out and "Rain\\x1b[2J" in result.out

