"""`tree import` of a tree written by the published A2X implementation (taxonomy.json + class.json), on a small
fixture written here in that format over the ten-service test registry; then searched like any tree."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from a2x_local.errors import InputError
from a2x_local.search.llm.a2x import A2XSearch
from a2x_local.taxonomy.importer import import_tree, read_tree_file
from a2x_local.testing import ScriptedEngine
from tests.search.a2x_helpers import Oracle, descent_config
from tests.support.registries import SERVICES

# Children listed in string order of their ids, as that implementation writes them (sub10 before sub2).
TAXONOMY = {
    "version": "2.0-hierarchical",
    "root": "root",
    "categories": {
        "root": {"children": ["cat_sub1", "cat_sub10", "cat_sub2"], "services": ["news"]},
        "cat_sub1": {"children": ["cat_sub1_sub1", "cat_sub1_sub2"], "services": []},
        "cat_sub1_sub1": {"children": [], "services": ["flights", "currency"]},
        "cat_sub1_sub2": {"children": [], "services": ["hotels", "restaurants"]},
        "cat_sub2": {"children": [], "services": ["stocks", "currency"]},
        "cat_sub10": {"children": [], "services": ["email", "calendar", "translate", "weather"]},
    },
    "build_status": "complete",
}
CLASSES = {
    "version": "2.0-hierarchical",
    "categories": {
        "root": {"name": "All API Services", "description": "Every service."},
        "cat_sub1": {"name": "Travel & Dining", "description": "Trips, stays and meals.",
                     "boundary": "Includes flights and hotels. Excludes payments.",
                     "decision_rule": "Classify here if the user is planning a trip."},
        "cat_sub1_sub1": {"name": "Flights", "description": "Air travel."},
        "cat_sub1_sub2": {"name": "Stays and Meals", "description": "Hotels and restaurants."},
        "cat_sub2": {"name": "Finance", "description": "Money and markets."},
        "cat_sub10": {"name": "Productivity", "description": "Mail, calendars, language, weather."},
    },
}


def write(folder: Path, taxonomy: dict | None = None, classes: dict | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "taxonomy.json").write_text(json.dumps(taxonomy or TAXONOMY))
    if classes is not False:
        (folder / "class.json").write_text(json.dumps(classes or CLASSES))
    return folder


def test_the_folder_imports_with_names_boundaries_and_children_in_creation_order(cli, registry_db, tmp_path):
    folder = write(tmp_path / "taxonomy")
    result = cli("tree", "import", folder, "--json").json()
    assert result["format"] == "a2x-registry" and result["nodes"] == 6 and result["leaves"] == 4
    assert result["services"] == 10 and result["warnings"] == []
    # 10 leaf placements (currency on two leaves, eight services on one) over 10 services (news on none: the root's).
    assert result["mean_leaves_per_service"] == 1.0
    shown = cli("tree", "show", "--json", "--depth", "2").json()
    assert [c["name"] for c in shown["children"]] == ["Travel & Dining", "Finance", "Productivity"]
    exported = cli("tree", "export").json()["root"]
    travel = exported["children"][0]
    assert travel["boundary"] == "Includes flights and hotels. Excludes payments."
    assert travel["decision_rule"] == "Classify here if the user is planning a trip."
    assert exported["services"] == ["news"] and sorted(exported["children"][1]["services"]) == ["currency", "stocks"]
    # The taxonomy.json itself works too, and gives the same tree.
    again = cli("tree", "import", folder / "taxonomy.json", "--no-activate", "--json").json()
    assert cli("tree", "export", "--id", str(again["build"])).json()["root"] == exported


def test_the_imported_tree_is_searched_like_a_built_one(tmp_path):
    data = read_tree_file(write(tmp_path / "t"))
    services = {s.id: s for s in SERVICES}
    tree, _ = import_tree(data, services)
    tree.registry_fingerprint = "fp"
    oracle = Oracle(tree, {"fly to Rome and change money": {"flights", "currency"}})
    method = A2XSearch(tree, services, ScriptedEngine(oracle), descent_config())
    answer = method.search("fly to Rome and change money", mode="get_all")
    assert set(answer.ids) == {"flights", "currency"}
    one = method.search("fly to Rome and change money", mode="get_one")
    assert len(one.ids) == 1 and one.ids[0] in {"flights", "currency"}
    # In get_one the imported boundary is shown as what it is, not as a NOT-here clause.
    descend = next(r for r in oracle.seen if r.context["call"] == "descend" and r.context["mode"] == "get_one")
    assert "(boundary: Includes flights and hotels. Excludes payments.)" in descend.messages[1]["content"]


def test_service_ids_the_registry_lacks_are_refused_unless_allowed(cli, registry_db, tmp_path):
    taxonomy = json.loads(json.dumps(TAXONOMY))
    taxonomy["categories"]["cat_sub2"]["services"].append("ghost_tool")
    folder = write(tmp_path / "t", taxonomy)
    refused = cli("tree", "import", folder)
    assert refused.code == 1 and "'ghost_tool' (in 'Finance')" in refused.err and "--allow-missing" in refused.err
    assert cli("tree", "list", "--json").json() == []               # nothing half-written
    allowed = cli("tree", "import", folder, "--allow-missing", "--json").json()
    assert allowed["services"] == 10
    assert allowed["warnings"] == ["1 service ids of the tree are not in the registry and were dropped"
                                   " (e.g. 'ghost_tool')"]


def test_missing_class_file_unnamed_and_unreachable_categories(tmp_path):
    folder = write(tmp_path / "no_classes", classes=False)
    with pytest.raises(InputError, match=r"needs its class\.json beside it"):
        read_tree_file(folder)
    classes = json.loads(json.dumps(CLASSES))
    del classes["categories"]["cat_sub2"]
    taxonomy = json.loads(json.dumps(TAXONOMY))
    taxonomy["categories"]["orphan"] = {"children": [], "services": []}
    taxonomy["build_status"] = "keywords"
    data = read_tree_file(write(tmp_path / "partial", taxonomy, classes) / "taxonomy.json")
    tree, warnings = import_tree(data, {s.id for s in SERVICES})
    assert tree.nodes["root/2"].name == "cat_sub2"
    assert any("build_status is 'keywords'" in w for w in warnings)
    assert any("1 categories are not reachable" in w for w in warnings)
    assert any("no entry in class.json" in w and "cat_sub2" in w for w in warnings)


@pytest.mark.parametrize(("change", "message"), [
    (lambda t: t["categories"]["cat_sub1_sub1"]["children"].append("root"),
     "category 'root' is listed under 'cat_sub1_sub1', which lies under it (the parent links loop: root > cat_sub1"
     " > cat_sub1_sub1 > root)"),
    (lambda t: t["categories"]["cat_sub1_sub2"]["children"].append("cat_sub1"), "the parent links loop: cat_sub1 >"
     " cat_sub1_sub2 > cat_sub1"),
    (lambda t: t["categories"]["root"]["children"].append("nowhere"), "child 'nowhere' is not among"),
    (lambda t: t.update(root="top"), "the root 'top' is not among the categories"),
    (lambda t: t["categories"]["cat_sub2"].update(services="stocks"), "'services' must be a list of id strings"),
], ids=["loop-to-root", "loop", "dangling", "no-root", "bad-services"])
def test_a_structure_that_is_not_a_tree_is_an_error_naming_the_category(tmp_path, change, message):
    taxonomy = json.loads(json.dumps(TAXONOMY))
    change(taxonomy)
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        read_tree_file(write(tmp_path / "bad", taxonomy))


def test_the_parsed_taxonomy_file_alone_is_refused_with_how_to_import_it():
    with pytest.raises(InputError, match="import its folder"):
        import_tree(TAXONOMY, {s.id for s in SERVICES})


def _two_parents() -> dict:
    """The fixture with 'Flights' (and the services under it) also listed under 'Finance', as the published
    implementation's publicMCP tree lists cat_sub22_sub8 under cat_sub22 and cat_sub4_sub22."""
    taxonomy = json.loads(json.dumps(TAXONOMY))
    taxonomy["categories"]["cat_sub1_sub1"]["children"] = ["cat_sub1_sub1_sub1"]
    taxonomy["categories"]["cat_sub1_sub1_sub1"] = {"children": [], "services": ["flights"]}
    taxonomy["categories"]["cat_sub2"]["children"] = ["cat_sub1_sub1"]
    return taxonomy


def test_a_category_under_two_parents_is_imported_under_each_with_one_warning(cli, registry_db, tmp_path):
    classes = json.loads(json.dumps(CLASSES))
    classes["categories"]["cat_sub1_sub1_sub1"] = {"name": "Airlines", "description": "Flight booking."}
    folder = write(tmp_path / "dag", _two_parents(), classes)
    result = cli("tree", "import", folder, "--json").json()
    assert result["warnings"] == ["1 categories are listed under several parents (e.g. 'cat_sub1_sub1' under"
                                  " 'cat_sub1' and 'cat_sub2'): each is imported under every parent, as the"
                                  " published search reaches it from each"]
    exported = cli("tree", "export").json()["root"]
    travel, finance, _ = exported["children"]
    under_travel = next(c for c in travel["children"] if c["name"] == "Flights")
    under_finance = next(c for c in finance["children"] if c["name"] == "Flights")
    # The same category, with its own services and its child, under each parent.
    for flights in (under_travel, under_finance):
        assert sorted(flights["services"]) == ["currency", "flights"]
        assert [(c["name"], c["services"]) for c in flights["children"]] == [("Airlines", ["flights"])]
    assert sorted(finance["services"]) == ["currency", "stocks"]
    # Every service of the published tree is placed, none twice on one path: the services are the same.
    assert result["services"] == 10
    plain = cli("tree", "import", folder, "--no-activate")
    assert plain.code == 0 and plain.err.count("listed under several parents") == 1


def test_a_category_under_two_parents_is_found_from_either_parent(tmp_path):
    data = read_tree_file(write(tmp_path / "dag", _two_parents()))
    tree, warnings = import_tree(data, {s.id for s in SERVICES})
    assert sum("several parents" in w for w in warnings) == 1
    services = {s.id: s for s in SERVICES}
    flights_nodes = [n.id for n in tree.walk() if n.name == "Flights"]
    assert len(flights_nodes) == 2 and {tree.nodes[n].parent for n in flights_nodes} == {"root/1", "root/2"}
    # A query that descends only into Finance still reaches the flights, as the published search would.
    oracle = Oracle(tree, {"pay for a flight": {"flights"}})
    method = A2XSearch(tree, services, ScriptedEngine(oracle), descent_config())
    assert method.search("pay for a flight", mode="get_all").ids == ["flights"]
    finance_only = A2XSearch(tree, services, ScriptedEngine(_only_under("root/2", oracle)), descent_config())
    answer = finance_only.search("pay for a flight", mode="get_all")
    assert answer.ids == ["flights"] and answer.hits[0].path[:2] == ["root", "root/2"]


def _only_under(node: str, oracle: Oracle):
    """The oracle, except that at the root it chooses only ``node``'s position."""

    def rule(request):
        if request.context["call"] == "descend" and request.context["node"] == "root":
            return str(request.context["options"].index(node) + 1)
        return oracle(request)

    return rule
