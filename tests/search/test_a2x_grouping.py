"""Candidate groups: de-duplication, merging by deepest common ancestor, capping, deterministic order."""

from __future__ import annotations

import random

from a2x_local.search.llm.grouping import TreeIndex, dedupe, extra_group, merge_small, split, tree_groups
from tests.search.a2x_helpers import make_tree, sample_tree


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
    # The exact groups, worked out by hand from the tree: an order that depended on set or hash order would fail.
    assert [g.services for g in groups] == [["g1", *_ids("s", 20)], _ids("s", 40)[20:], _ids("f", 21),
                                            [*_ids("f", 40)[21:], "h1"]]
    again, _ = tree_groups(list(reversed(reached)), index, threshold=30, cap=30)
    assert [g.services for g in again] == [g.services for g in groups]


def test_an_extra_group_leaves_out_what_the_tree_already_offered():
    groups = extra_group("rescue", ["f1", "x1", "x1", "x2"], exclude=["f1"], cap=60)
    assert [(g.key, g.services) for g in groups] == [("rescue", ["x1", "x2"])]
    assert extra_group("rescue", ["f1"], exclude=["f1"], cap=60) == []


def _pairwise_merge(groups: dict[str, list[str]], index: TreeIndex, threshold: int) -> dict[str, list[str]]:
    """The definition merge_small implements, as a direct (cubic) search: repeatedly merge the (small group, other
    group) pair with the deepest common ancestor (ties: smaller result, then tree order) into that ancestor."""
    parts = {key: [key] for key in groups}
    size = {key: len(members) for key, members in groups.items()}
    while len(parts) > 1:
        best, pair = None, ("", "", "")
        for key in parts:
            if size[key] >= threshold:
                continue
            for other in parts:
                if other != key:
                    depth, common = index.common_depth(key, other)
                    rank = (-depth, size[key] + size[other], index.order[key], index.order[other])
                    if best is None or rank < best:
                        best, pair = rank, (key, other, common)
        if best is None:
            break
        merged = set(pair) & set(parts)
        parts[pair[2]] = sorted((p for k in merged for p in parts.pop(k)), key=index.order.__getitem__)
        size[pair[2]] = sum(size.pop(k) for k in merged)
    return {key: [s for part in members for s in groups[part]] for key, members in parts.items()}


def _random_tree(rng: random.Random, nodes: int):
    shape = {"root": ("All", [])}
    for _ in range(nodes):
        parent = rng.choice(list(shape))
        siblings = sum(1 for node in shape if node.rpartition("/")[0] == parent)
        shape[f"{parent}/{siblings + 1}"] = (f"n{len(shape)}", [])
    return make_tree(shape)


def test_merging_matches_the_pairwise_definition_on_random_trees():
    rng = random.Random(7)
    for _ in range(400):
        tree = _random_tree(rng, rng.randint(1, 25))
        index = TreeIndex(tree)
        reached = rng.sample(list(tree.nodes), rng.randint(1, len(tree.nodes)))
        groups = {node: _ids(f"{node}#", rng.choice([1, 1, 2, 3, 5, 8, 13])) for node in reached}
        threshold = rng.choice([0, 2, 3, 5, 10, 30])
        assert merge_small(groups, index, threshold) == _pairwise_merge(groups, index, threshold)


def _wide_tree(tops: int, subs: int, leaves: int):
    shape = {"root": ("All", [])}
    for a in range(1, tops + 1):
        shape[f"root/{a}"] = (f"T{a}", [])
        for b in range(1, subs + 1):
            shape[f"root/{a}/{b}"] = (f"S{a}.{b}", [])
            for c in range(1, leaves + 1):
                shape[f"root/{a}/{b}/{c}"] = (f"L{a}.{b}.{c}", [])
    return make_tree(shape)


def test_a_wide_descent_merges_into_valid_groups():
    tree = _wide_tree(5, 5, 6)   # 150 leaves, every one reached with one to three services
    index = TreeIndex(tree)
    rng = random.Random(3)
    reached = [(leaf.id, _ids(f"{leaf.id}#", rng.randint(1, 3))) for leaf in tree.leaves()]
    assert len(reached) == 150
    candidates = [s for _, services in reached for s in services]
    merged = merge_small(dedupe(reached)[0], index, threshold=30)
    offered = [s for services in merged.values() for s in services]
    assert sorted(offered) == sorted(candidates)                      # every candidate in exactly one group
    assert len(merged) > 1 and all(len(services) >= 30 for services in merged.values())
    assert set(merged) <= set(tree.nodes)
    groups, _ = tree_groups(reached, index, threshold=30, cap=60)
    assert sorted(s for g in groups for s in g.services) == sorted(candidates)
    assert all(len(g.services) <= 60 for g in groups)
    # Everything together below the threshold: one group, keyed by the deepest node holding them all.
    assert list(merge_small(dedupe(reached[:6])[0], index, threshold=1000)) == ["root/1/1"]
    few = reached[::30]   # one leaf in each top-level category
    assert list(merge_small(dedupe(few)[0], index, threshold=1000)) == ["root"]
