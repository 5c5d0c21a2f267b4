"""The token levers of the A2X search that shape what the model reads: compact service and category lines,
boundaries only between confusable siblings, direct selection of small subtrees, the prompt layout, and the
prefix-cache measure the layout is judged by."""

from __future__ import annotations

import pytest

from a2x_local.llm.tokens import chat_token_ids, count_chat_tokens
from a2x_local.registry.types import Service
from a2x_local.search import descend_tree
from a2x_local.search.llm.a2x import A2XSearch
from a2x_local.search.llm.config import LlmSearchConfig
from a2x_local.search.llm.descent import Descender
from a2x_local.search.llm.listing import (
    category_line,
    clip_words,
    confusable,
    first_sentence,
    service_lines,
    shared_opening,
)
from a2x_local.search.types import SearchRequest
from a2x_local.settings import load_settings
from a2x_local.taxonomy.types import TreeNode
from a2x_local.testing import ScriptedEngine, uncached_tokens
from tests.search.a2x_helpers import Oracle, descent_config, make_tree, sample_services, sample_tree

LONG = ("Returns the five-day weather forecast for a city. Accepts a city name or coordinates, a unit system and a"
        " language, and answers with hourly temperatures, rain chances and wind speeds.")


def _service(sid: str, name: str, description: str = LONG) -> Service:
    return Service(sid, "generic", name, description)


def test_first_sentence_skips_abbreviations_and_keeps_short_texts_whole():
    assert first_sentence(LONG) == "Returns the five-day weather forecast for a city."
    assert first_sentence("Get info, e.g. the price. Then more.") == "Get info, e.g. the price."
    assert first_sentence("No full stop at all") == "No full stop at all"
    chinese = "返回一个城市未来五天的天气预报，包括每小时的温度和降雨概率。接受城市名称或坐标。"
    assert first_sentence(chinese) == "返回一个城市未来五天的天气预报，包括每小时的温度和降雨概率。"


def test_clip_words_cuts_after_a_whole_word_and_never_on_a_dangling_word():
    assert clip_words("weather forecasts, climate data and more", 30) == "weather forecasts, climate…"
    assert clip_words("maps, locations and geospatial data", 22) == "maps, locations…"
    assert clip_words("short", 30) == "short" and clip_words("anything", 0) == "anything"
    assert clip_words("Supercalifragilistic", 8) == "Superca…"


def test_compact_service_lines_keep_the_first_sentence_unless_the_name_is_shared():
    services = [_service("a", "get_weather"), _service("b", "Get Weather"), _service("c", "city_forecast")]
    full = service_lines(services, descent_config(service_lines="full"))
    compact = service_lines(services, descent_config(service_lines="compact", compact_service_chars=80))
    assert compact["c"] == "city_forecast: Returns the five-day weather forecast for a city."
    # "get_weather" and "Get Weather" are one name: neither line alone would tell the two apart.
    assert compact["a"] == full["a"] and compact["b"] == full["b"] and len(compact["a"]) > len(compact["c"])
    assert count_chat_tokens([{"role": "user", "content": compact["c"]}]) < count_chat_tokens(
        [{"role": "user", "content": full["c"]}])
    shorter = service_lines(services, descent_config(service_lines="compact", compact_service_chars=30))
    assert shorter["c"] == "city_forecast: Returns the five-day weather…"


def test_compact_category_lines_drop_the_siblings_shared_opening():
    descriptions = ["Services for weather forecasts, climate data and air quality.",
                    "Services for maps, locations and geospatial data.",
                    "Services providing ranked lists of songs.", "Jokes."]
    assert shared_opening(descriptions) == "Services for"
    assert shared_opening(["Weather.", "Maps."]) == "" and shared_opening([]) == ""
    node = TreeNode("root/1", "root", 1, "Weather & Environment", descriptions[0], boundary="NOT here: maps")
    config = descent_config(category_lines="compact", compact_category_chars=35)
    assert category_line(node, config, boundary=False, opening="Services for") == (
        "Weather & Environment: weather forecasts, climate data…")
    full = category_line(node, descent_config(category_lines="full"), boundary=True,
                         opening="Services for")
    assert full == f"Weather & Environment: {descriptions[0]} (NOT here: maps)"


def test_boundaries_mark_only_siblings_that_share_services():
    members = {"a": frozenset({"s1", "s2", "s3", "s4"}), "b": frozenset({"s4", "s5"}),
               "c": frozenset({"s6", "s7"}), "d": frozenset()}
    assert confusable(members, 0.5) == {"a", "b"}        # b shares 1 of its 2 services with a
    assert confusable(members, 0.6) == set()
    assert confusable(members, 0.0) == {"a", "b", "c", "d"}


def test_get_one_shows_a_boundary_only_where_siblings_are_easily_confused():
    # Travel and Finance share f1 (1 of Travel's 6 services): confused at a 0.1 overlap, not at 0.5.
    tree = sample_tree()
    engine = ScriptedEngine(lambda r: "1")
    for overlap, shown in ((0.1, {"Travel", "Finance"}), (0.5, set()), (0.0, {"Travel", "Weather", "Finance"})):
        config = descent_config(boundary_min_overlap=overlap)
        listing = Descender(tree, engine, config).request("fly", "get_one", "root").messages[1]["content"]
        with_boundary = {line.split(". ", 1)[1].split(":")[0] for line in listing.splitlines() if "NOT here" in line}
        assert with_boundary == shown
        get_all = Descender(tree, engine, config).request("fly", "get_all", "root").messages[1]["content"]
        assert "NOT here" not in get_all


def test_direct_selection_skips_the_descent_of_small_subtrees():
    tree = sample_tree()   # Travel holds 6 services under two leaves, Finance 7 under two; Weather is a leaf of 4
    wanted = {"hotel tonight": {"h1", "h2"}}
    oracle = Oracle(tree, wanted)
    method = A2XSearch(tree, sample_services(), ScriptedEngine(oracle),
                       LlmSearchConfig.defaults(merge_threshold=0, direct_select_below=6))
    answer = method.search("hotel tonight")
    assert answer.ids == ["h1", "h2"] and answer.trace["direct"] == ["root/1"]
    # Travel (6 services) was not asked about its sub-categories: all of it went to selection in tree order.
    descents = [r.context["node"] for r in oracle.seen if r.context["call"] == "descend"]
    assert descents == ["root"]
    offered = [s for g in answer.trace["selection"] for s in g["services"]]
    assert offered == ["t0", "f1", "f2", "f3", "h1", "h2"]
    assert answer.hits[0].path == ["root", "root/1"] and answer.cost.rounds == 2
    # Off, the same query takes a descent round more and sees only the hotels and Travel's own service.
    plain = A2XSearch(tree, sample_services(), ScriptedEngine(Oracle(tree, wanted)),
                      LlmSearchConfig.defaults(merge_threshold=0, direct_select_below=0,
                                               other_services_child="root")).search("hotel tonight")
    assert plain.cost.rounds == 3 and plain.trace["direct"] == []
    assert {s for g in plain.trace["selection"] for s in g["services"]} == {"t0", "h1", "h2"}


def test_a_leaf_is_never_selected_directly_and_placement_descends_every_level(db_path):
    tree = sample_tree()
    oracle = Oracle(tree, {"hotel tonight": {"h1"}})
    answer = A2XSearch(tree, sample_services(), ScriptedEngine(oracle),
                       LlmSearchConfig.defaults(direct_select_below=100)).search("hotel tonight")
    assert answer.trace["direct"] == ["root"] and answer.ids == ["h1"] and answer.cost.rounds == 1
    # Placement files a service by its descent decisions, so it never stops early.
    settings = load_settings(db=db_path)
    walks = descend_tree(settings, tree, ScriptedEngine(Oracle(tree, {"hotel tonight": {"h1"}})),
                         ["hotel tonight"], direct_select_below=100)
    assert walks[0].direct == [] and [d.node for d in walks[0].decisions] == ["root", "root/1"]


def test_placement_reads_the_categories_as_built(db_path):
    shape = {"root": ("All", []), "root/1": ("Weather", ["w1"]), "root/2": ("Maps", ["m1"])}
    tree = make_tree(shape)
    for node in tree.walk():
        node.description = f"Services for {node.name.lower()} data of every kind. Updated hourly, worldwide."
    seen = []
    descend_tree(load_settings(db=db_path), tree, ScriptedEngine(lambda r: seen.append(r) or "1"), ["a new tool"])
    assert "1. Weather: Services for weather data of every kind. Updated hourly, worldwide." in seen[0].messages[1][
        "content"]


def test_placement_offers_categories_only_even_where_a_node_holds_services(db_path):
    tree = sample_tree()   # the root holds g1 beside its three categories
    seen = []

    def last_option(request):
        seen.append(request)
        return str(len(request.context["options"]))

    walks = descend_tree(load_settings(db=db_path), tree, ScriptedEngine(last_option), ["a new tool"])
    assert seen[0].context["options"] == ["root/1", "root/2", "root/3"]
    assert walks[0].decisions[0].selected == ["root/3"] and walks[0].decisions[1].node == "root/3"


@pytest.mark.parametrize("call", ["descend", "select"])
def test_the_query_comes_last_so_requests_at_one_node_share_their_prefix(call):
    tree = sample_tree()
    seen = []
    method = A2XSearch(tree, sample_services(), ScriptedEngine(lambda r: seen.append(r) or "1"),
                       descent_config(merge_threshold=100, group_lists="merged"))
    method.search_batch([SearchRequest("find me a cheap hotel"), SearchRequest("book a flight to Rome")])
    first, second = [r for r in seen if r.context["call"] == call][:2]
    assert first.messages[1]["content"].endswith("Request: find me a cheap hotel")
    assert first.messages[1]["content"].rsplit("Request: ", 1)[0] == second.messages[1]["content"].rsplit(
        "Request: ", 1)[0]
    tokens = [chat_token_ids(r.messages) for r in (first, second)]
    uncached = uncached_tokens(tokens)
    assert uncached[0] == len(tokens[0]) and uncached[1] < len(tokens[1]) // 3
    # Query first: the same tokens, but the second prompt shares only the instructions.
    seen.clear()
    method = A2XSearch(tree, sample_services(), ScriptedEngine(lambda r: seen.append(r) or "1"),
                       descent_config(merge_threshold=100, group_lists="merged", prompt_layout="query_first"))
    method.search_batch([SearchRequest("find me a cheap hotel"), SearchRequest("book a flight to Rome")])
    swapped = [r for r in seen if r.context["call"] == call][:2]
    assert swapped[0].messages[1]["content"].startswith("Request: find me a cheap hotel\n\n")
    assert swapped[0].messages[1]["content"].count("Request:") == 1
    swapped_tokens = [chat_token_ids(r.messages) for r in swapped]
    assert abs(len(swapped_tokens[1]) - len(tokens[1])) <= 2
    assert uncached_tokens(swapped_tokens)[1] > uncached[1]


def test_uncached_tokens_count_what_no_earlier_prompt_of_the_round_shares():
    assert uncached_tokens([[1, 2, 3, 4], [1, 2, 3, 5], [1, 2, 9], [7], [1, 2, 3, 4]]) == [4, 1, 1, 1, 0]
    assert uncached_tokens([]) == []
    # Only earlier prompts count: the first of two identical prompts is computed in full.
    assert uncached_tokens([[5, 6], [5, 6, 7]]) == [2, 1]


def test_compact_levers_shrink_the_prompts_of_a_real_sized_listing():
    shape = {"root": ("All", [])} | {
        f"root/{k}": (f"Category {k}", [f"s{k}_{j}" for j in range(4)]) for k in range(1, 13)}
    tree = make_tree(shape)
    for node in tree.walk():
        node.description = (f"Services for {node.name.lower()} tasks of every kind. They come with many details"
                            " about what they do, how, when and for whom.")
    services = {sid: _service(sid, f"tool_{sid}") for node in tree.walk() for sid in node.services}
    totals = {}
    for lines in ("full", "compact"):
        engine = ScriptedEngine(lambda r: "1")
        config = descent_config(category_lines=lines, service_lines=lines)
        A2XSearch(tree, services, engine, config).search("forecast")
        totals[lines] = {label: u.prompt_tokens for label, u in engine.usage.by_label.items()}
    assert totals["compact"]["descend"] < 0.8 * totals["full"]["descend"]
    assert totals["compact"]["select"] < 0.8 * totals["full"]["select"]
