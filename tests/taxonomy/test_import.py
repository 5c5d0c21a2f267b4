"""`tree import`: the documented formats, and every way a file can be wrong."""

from __future__ import annotations

import json

import pytest

from a2x_local.db import connect
from a2x_local.errors import InputError
from a2x_local.taxonomy import store
from a2x_local.taxonomy.export import to_dot, to_exchange
from a2x_local.taxonomy.importer import import_tree, read_tree_file, save_import
from tests.support.registries import make_registry
from tests.taxonomy.helpers import synthetic

KNOWN = {"w1", "w2", "t1", "t2", "m1"}


def nested() -> dict:
    return {"name": "All", "description": "Everything.", "services": ["m1"], "children": [
        {"name": "Weather", "description": "Forecasts.", "boundary": "NOT here: travel", "services": ["w1", "w2"]},
        {"name": "Travel", "description": "Trips.", "services": ["t1", "t2", "w1"], "children": []},
    ]}


def test_nested_and_flat_formats_give_the_same_tree():
    tree, warnings = import_tree({"format": "a2x-tree", "version": 1, "root": nested()}, KNOWN)
    assert warnings == []
    assert [tree.nodes[c].name for c in tree.root.children] == ["Weather", "Travel"]
    assert tree.root.children == ["root/1", "root/2"] and tree.nodes["root/1"].boundary == "NOT here: travel"
    assert tree.service_ids() == KNOWN and tree.nodes["root/2"].services == ["t1", "t2", "w1"]
    flat = {"format": "a2x-tree", "version": 1, "nodes": [
        {"id": "r", "parent": None, "name": "All", "description": "Everything.", "services": ["m1"]},
        {"id": "w", "parent": "r", "name": "Weather", "description": "Forecasts.", "boundary": "NOT here: travel",
         "services": ["w1", "w2"]},
        {"id": "t", "parent": "r", "name": "Travel", "description": "Trips.", "services": ["t1", "t2", "w1"]},
    ]}
    other, _ = import_tree(flat, KNOWN)
    assert other.to_nested() == tree.to_nested()
    bare, _ = import_tree(nested(), KNOWN)                 # what Tree.to_nested() writes
    assert bare.to_nested() == tree.to_nested()


def test_export_format_round_trips_and_dot_is_graphviz():
    tree, _ = import_tree(nested(), KNOWN)
    again, _ = import_tree(json.loads(json.dumps(to_exchange(tree))), KNOWN)
    assert again.to_nested() == tree.to_nested()
    dot = to_dot(tree)
    assert dot.startswith("digraph taxonomy {") and '"root" -> "root/2";' in dot and "Weather\\n2 direct" in dot


def test_unknown_service_ids_are_named():
    data = nested()
    data["children"][0]["services"].append("ghost")
    with pytest.raises(InputError, match=r"1 unknown service id\(s\): 'ghost' \(in 'Weather'\)"):
        import_tree(data, KNOWN, source="t.json")


def test_a_reused_node_object_is_a_cycle():
    data = nested()
    data["children"][1]["children"].append(data)          # the root inside its own subtree
    with pytest.raises(InputError, match="same node object appears twice"):
        import_tree(data, KNOWN)
    shared = {"name": "Shared", "description": "x"}
    data = nested()
    data["children"][0]["children"] = [shared]
    data["children"][1]["children"] = [shared]
    with pytest.raises(InputError, match="same node object appears twice"):
        import_tree(data, KNOWN)


def test_repeated_ids_and_looping_parent_links_are_cycles():
    data = nested()
    data["id"] = "a"
    data["children"][1]["id"] = "a"
    with pytest.raises(InputError, match="node id 'a' appears twice"):
        import_tree(data, KNOWN)
    flat = {"nodes": [
        {"id": "r", "parent": None, "name": "All", "description": "x"},
        {"id": "a", "parent": "b", "name": "A", "description": "x"},
        {"id": "b", "parent": "a", "name": "B", "description": "x"},
    ]}
    with pytest.raises(InputError, match=r"cycle in parent links: (a -> b -> a|b -> a -> b)"):
        import_tree(flat, KNOWN)
    flat["nodes"][1]["parent"] = "nowhere"
    with pytest.raises(InputError, match="parent 'nowhere' of node 'a' does not exist"):
        import_tree(flat, KNOWN)


@pytest.mark.parametrize(("data", "message"), [
    ([1, 2], "expected a JSON object"),
    ({"description": "no name"}, "missing 'name'"),
    ({"name": "", "description": "x"}, "'name' must not be empty"),
    ({"name": "x", "description": "x", "services": "w1"}, "list of service id strings"),
    ({"name": "x", "description": "x", "children": {}}, "'children' must be a list"),
    ({"name": "x", "description": "x", "service": ["w1"]}, "unknown field"),
    ({"format": "other", "root": {"name": "x", "description": "x"}}, "expected 'a2x-tree'"),
    ({"format": "a2x-tree", "version": 7, "root": {"name": "x", "description": "x"}}, "version 7"),
    ({"nodes": [{"id": "a", "parent": "b", "name": "x", "description": "x"},
                {"id": "b", "parent": "a", "name": "y", "description": "x"}]}, "exactly one node without a parent"),
    ({"nodes": []}, "non-empty list"),
])
def test_malformed_trees_are_clear_errors(data, message):
    with pytest.raises(InputError, match=message):
        import_tree(data, KNOWN, source="t.json")


def test_too_deep_a_tree_is_refused():
    node = {"name": "leaf", "description": "x"}
    for depth in range(40):
        node = {"name": f"n{depth}", "description": "x", "children": [node]}
    with pytest.raises(InputError, match="deeper than 32 levels"):
        import_tree(node, KNOWN)


def test_unplaced_registry_services_are_a_warning(tmp_path):
    _tree, warnings = import_tree({"name": "All", "description": "x", "services": ["w1"]}, KNOWN)
    assert warnings == ["4 of 5 registry services are not in the imported tree; searches cannot find them"]
    path = tmp_path / "t.json"
    path.write_text("[1,")
    with pytest.raises(InputError, match="not valid JSON"):
        read_tree_file(path)


def test_an_import_is_stored_as_a_build_of_kind_import(tmp_path):
    services = synthetic(["w", "t"], 2)
    db = make_registry(tmp_path / "r.duckdb", services)
    data = {"name": "All", "description": "x", "children": [
        {"name": "W", "description": "w", "services": ["w_00", "w_01"]},
        {"name": "T", "description": "t", "services": ["t_00", "t_01"]}]}
    tree, warnings = import_tree(data, {s.id for s in services})
    with connect(db) as con:
        build_id = save_import(con, tree, fingerprint="fp", source="t.json", activate=True, warnings=warnings)
        record = store.get_build(con, build_id)
        loaded = store.load_active_tree(con)
    assert record.kind == "import" and record.status == "completed" and record.active and record.source == "t.json"
    assert loaded.to_nested() == tree.to_nested() and loaded.build_id == build_id
