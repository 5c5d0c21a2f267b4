"""`resplit_nodes`: the build's steps for chosen over-full leaves only; the rest of the tree stays as it was."""

from __future__ import annotations

import copy

from a2x_local.taxonomy import overfull_leaves, resplit_nodes
from a2x_local.taxonomy.induction.language import category_language
from a2x_local.testing import ScriptedEngine
from tests.lifecycle.world import World, services, world_config
from tests.taxonomy.helpers import build


def built_tree(service_list, config):
    state, _ = build(service_list, config, World())
    return state.tree("fp")


def test_only_the_overfull_leaves_are_split_with_ids_under_them():
    listed = services({"weather": ["rain", "snow"], "music": ["jazz"]}, 4)
    config = world_config(leaf_max_services=8)
    tree = built_tree(listed, config)
    assert [n.name for n in tree.children("root")] == ["Music", "Weather"]
    # Eight more services filed into Weather (as placement would): 16 > θ_leaf.
    extra = services({"weather": ["rain", "snow"]}, 4, start=10)
    grown = copy.deepcopy(tree)
    grown.nodes["root/2"].services += [s.id for s in extra]
    overfull = overfull_leaves(grown, config)
    assert overfull == [{"node": "root/2", "name": "Weather", "depth": 1, "services": 16, "splittable": True}]
    engine = ScriptedEngine(World())
    outcome = resplit_nodes(grown, {s.id: s for s in [*listed, *extra]}, config, engine, ["root/2"])
    new = outcome.tree
    assert outcome.split == ["root/2"] and outcome.unsplit == [] and outcome.error is None
    assert [new.node(c).name for c in new.node("root/2").children] == ["Rain", "Snow"]
    assert new.node("root/2/1").services == [f"weather-rain-{i}" for i in (0, 1, 2, 3, 10, 11, 12, 13)]
    assert new.node("root/1").services == tree.node("root/1").services          # Music untouched
    assert new.service_ids() == grown.service_ids()
    assert grown.node("root/2").children == []                                  # the input tree is not changed
    assert engine.usage.by_label["design_descriptions"].calls == 1             # one node designed, nothing else
    assert not overfull_leaves(new, config)


def test_leaves_at_the_depth_limit_are_listed_as_not_splittable():
    listed = services({"weather": ["rain"], "music": ["jazz"]}, 6)
    config = world_config(leaf_max_services=4, max_depth=1)
    tree = built_tree(listed, config)
    assert all(not leaf["splittable"] for leaf in overfull_leaves(tree, config))
    assert {leaf["node"] for leaf in overfull_leaves(tree, config)} == {"root/1", "root/2"}


def test_a_round_that_fails_leaves_the_tree_as_it_was_with_the_error():
    listed = services({"weather": ["rain", "snow"], "music": ["jazz"]}, 4)
    config = world_config(leaf_max_services=8, max_failed_fraction=0.0)
    tree = built_tree(listed, config)
    grown = copy.deepcopy(tree)
    grown.nodes["root/2"].services += [s.id for s in services({"weather": ["rain"]}, 4, start=10)]
    all_services = {s.id: s for s in [*listed, *services({"weather": ["rain"]}, 4, start=10)]}
    outcome = resplit_nodes(grown, all_services, config, ScriptedEngine(lambda request: "not json"), ["root/2"])
    assert outcome.split == [] and outcome.unsplit == ["root/2"] and "invalid" in outcome.error
    assert outcome.tree is grown


def test_a_resplit_names_the_registry_language_as_the_build_did():
    listed = services({"weather": ["rain", "snow"], "music": ["jazz"]}, 4)
    config = world_config(leaf_max_services=8)
    assert config.category_language == "auto"
    grown = built_tree(listed, config)
    extra = services({"weather": ["rain", "snow"]}, 4, start=10)
    grown.nodes["root/2"].services += [s.id for s in extra]
    world, seen = World(), []
    resplit_nodes(grown, {s.id: s for s in [*listed, *extra]}, config,
                  ScriptedEngine(lambda request: seen.append(request) or world(request)), ["root/2"])
    designs = [request.messages[0]["content"] for request in seen if request.context.get("step") == "design"]
    language = category_language(config, [*listed, *extra])
    assert designs and all(f"{language}, the language of the registry's services" in text for text in designs)
    assert not any("the language the services are written in" in text for text in designs)
