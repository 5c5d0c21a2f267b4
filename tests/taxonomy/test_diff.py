"""`diff_trees`: categories matched by path and name (renamed when mostly the same services), services moved."""

from __future__ import annotations

from collections.abc import Mapping

from a2x_local.taxonomy import Tree, TreeNode, diff_trees


def tree(shape: Mapping[str, tuple[str, list[str]]], build_id: int) -> Tree:
    nodes: dict[str, TreeNode] = {}
    for node_id, (name, services) in shape.items():
        parent = node_id.rsplit("/", 1)[0] if "/" in node_id else None
        nodes[node_id] = TreeNode(node_id, parent, node_id.count("/"), name, f"{name}.", services=list(services))
        if parent is not None:
            nodes[parent].children.append(node_id)
    return Tree(nodes=nodes, build_id=build_id)


OLD = {
    "root": ("All services", []),
    "root/1": ("Travel", []),
    "root/1/1": ("Flights", ["f1", "f2", "f3"]),
    "root/1/2": ("Hotels", ["h1", "h2"]),
    "root/2": ("Weather", ["w1", "w2", "w3"]),
    "root/3": ("Money", ["p1", "p2", "s1"]),
    "root/4": ("Games", ["g1"]),
}

# Positions shuffled (ids mean nothing across builds), Money renamed Finance and split, Games gone, News new,
# h2 moved to Flights, g1 and w3 gone, n1 new.
NEW = {
    "root": ("All services", []),
    "root/1": ("weather ", ["w1", "w2"]),
    "root/2": ("Travel", []),
    "root/2/1": ("Hotels", ["h1"]),
    "root/2/2": ("Flights", ["f1", "f2", "f3", "h2"]),
    "root/3": ("Finance", []),
    "root/3/1": ("Payments", ["p1", "p2"]),
    "root/3/2": ("Stocks", ["s1"]),
    "root/4": ("News", ["n1"]),
}


def test_diff_names_what_was_added_removed_renamed_and_moved():
    diff = diff_trees(tree(OLD, 1), tree(NEW, 2))
    assert diff.categories_renamed == [{"a_id": "root/3", "b_id": "root/3", "from": "Money", "to": "Finance"}]
    assert [c["path"] for c in diff.categories_added] == ["Finance › Payments", "Finance › Stocks", "News"]
    assert [c["path"] for c in diff.categories_removed] == ["Games"]
    assert diff.categories_kept == 4                       # Travel, Flights, Hotels, Weather (spacing and case aside)
    assert diff.services_appeared == ["n1"] and diff.services_vanished == ["g1", "w3"]
    moved = {m["service"]: (m["from"], m["to"]) for m in diff.services_moved}
    assert moved["h2"] == (["Travel › Hotels"], ["Travel › Flights"])
    assert moved["p1"] == (["Money"], ["Finance › Payments"])   # the renamed category split into children
    assert "f1" not in moved and "w1" not in moved
    assert diff.counts()["services_moved"] == 4 and not diff.identical
    data = diff.to_dict()
    assert data["a"] == 1 and data["b"] == 2 and data["services"]["appeared"] == ["n1"]


def test_a_category_is_not_called_renamed_when_its_services_differ():
    old = {"root": ("All", []), "root/1": ("Alpha", ["a1", "a2", "a3"]), "root/2": ("Beta", ["b1"])}
    new = {"root": ("All", []), "root/1": ("Gamma", ["c1", "c2", "a1"]), "root/2": ("Beta", ["b1"])}
    diff = diff_trees(tree(old, 1), tree(new, 2))
    assert diff.categories_renamed == []
    assert [c["path"] for c in diff.categories_removed] == ["Alpha"]
    assert [c["path"] for c in diff.categories_added] == ["Gamma"]


def test_a_tree_is_identical_to_itself():
    diff = diff_trees(tree(OLD, 1), tree(OLD, 1))
    assert diff.identical and diff.categories_kept == 6 and diff.services_kept == 12
