"""Candidate groups: de-duplication, merging by deepest common ancestor, capping, deterministic order."""

from __future__ import annotations

from a2x_local.search.grouping import TreeIndex, dedupe, extra_group, merge_small, split, tree_groups
from tests.search.a2x_helpers import sample_tree


def _ids(prefix: str, n: int) -> list[str]:
    return [f"{prefix}{k}" for k in range(n)]


def test_a_service_reached_twice_is_offered_once_where_it_was_first_reached():
    groups, origin = dedupe([("root/1/1", ["f1", "f2"]), ("root/3/2", ["s1", "f1"]), ("root/2", [])])
    assert groups == {"root/1/1": ["f1", "f2"], "root/3/2": ["s1"]}
    assert origin == {"f1": "root/1/1", "f2": "root/1/1", "s1": "root/3/2"}


def test_small_groups_merge_with_their_closest_relative_first():
    index = TreeIndex(sample_tree())
    groups = {"root/1/1": _ids("f", 10), "root/1/2": _ids("h", 2), "root/3/1": _ids("p", 2),
              "root/3/2": _ids("s", 10)}
    merged = merge_small(groups, index, threshold=5)
    # Hotels joins its sibling Flights (common ancestor Travel), Payments joins Stocks (Finance), never across.
    assert merged == {"root/1": _ids("f", 10) + _ids("h", 2), "root/3": _ids("p", 2) + _ids("s", 10)}


def test_merging_continues_up_the_tree_until_groups_reach_the_threshold():
    index = TreeIndex(sample_tree())
    groups = {"root": ["g1"], "root/1": ["t0"], "root/1/1": ["f1", "f2"], "root/3/2": ["s1"]}
    assert merge_small(groups, index, threshold=30) == {"root": ["g1", "t0", "f1", "f2", "s1"]}
    assert merge_small(groups, index, threshold=0) == groups


def test_an_internal_nodes_own_services_merge_with_its_children():
    index = TreeIndex(sample_tree())
    merged = merge_small({"root/1/1": ["f1", "f2", "f3"], "root/1": ["t0"]}, index, threshold=3)
    assert merged == {"root/1": ["t0", "f1", "f2", "f3"]}


def test_groups_above_the_cap_are_split_into_near_equal_parts():
    parts = split("root/2", _ids("w", 25), cap=10)
    assert [len(p.services) for p in parts] == [9, 8, 8]
    assert [(p.part, p.parts) for p in parts] == [(1, 3), (2, 3), (3, 3)]
    assert [s for p in parts for s in p.services] == _ids("w", 25)
    assert len(split("root/2", _ids("w", 10), cap=10)) == 1
    assert len(split("root/2", _ids("w", 500), cap=None)) == 1


def test_tree_groups_merge_then_cap_in_tree_order():
    index = TreeIndex(sample_tree())
    reached = [("root", ["g1"]), ("root/3/2", _ids("s", 40)), ("root/1/1", _ids("f", 40)), ("root/1/2", ["h1"])]
    groups, origin = tree_groups(reached, index, threshold=30, cap=30)
    # Hotels joins its sibling Flights first (under Travel); g1, alone at the root, then joins the smaller of
    # the two remaining groups; each result above the cap is split in two.
    keys = [(g.key, g.part, len(g.services)) for g in groups]
    assert keys == [("root", 1, 21), ("root", 2, 20), ("root/1", 1, 21), ("root/1", 2, 20)]
    assert groups[0].services[0] == "g1" and groups[3].services[-1] == "h1"
    assert origin["h1"] == "root/1/2" and origin["g1"] == "root"
    again, _ = tree_groups(reached, index, threshold=30, cap=30)
    assert [g.services for g in again] == [g.services for g in groups]


def test_an_extra_group_leaves_out_what_the_tree_already_offered():
    groups = extra_group("rescue", ["f1", "x1", "x1", "x2"], exclude=["f1"], cap=60)
    assert [(g.key, g.services) for g in groups] == [("rescue", ["x1", "x2"])]
    assert extra_group("rescue", ["f1"], exclude=["f1"], cap=60) == []
