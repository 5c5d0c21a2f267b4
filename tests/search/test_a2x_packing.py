"""Two levers that cut the fixed cost of each prompt: a query's selection groups packed into as few prompts as the
cap allows, and the cross-language line only where the request and the catalogue differ in language."""

from __future__ import annotations

from a2x_local.registry.types import Service
from a2x_local.search.llm.a2x import A2XSearch
from a2x_local.search.llm.grouping import RESCUE_KEY, Group, pack
from a2x_local.search.llm.language_hint import LanguageHint
from a2x_local.search.llm.prompting import PROMPTS
from a2x_local.testing import ScriptedEngine
from tests.search.a2x_helpers import Oracle, descent_config, sample_services, sample_tree

ACROSS = PROMPTS.fragment("across_languages")


def _group(key: str, size: int, **kwargs) -> Group:
    return Group(key, [f"{key}-{k}" for k in range(size)], **kwargs)


def test_pack_fills_prompts_largest_first_and_keeps_tree_order_inside_a_pack():
    groups = [_group("a", 30), _group("b", 50), _group("c", 20), _group("d", 45)]
    packed = pack(groups, 100)
    # Largest first: b (50) then d (45) fill one prompt; a (30) and c (20) the next. Packs follow their first group.
    assert [g.key for g in packed] == ["a+c", "b+d"]
    assert packed[0].services == [*groups[0].services, *groups[2].services]
    assert all(len(g.services) <= 100 for g in packed)
    assert sorted(s for g in packed for s in g.services) == sorted(s for g in groups for s in g.services)


def test_pack_leaves_split_parts_and_the_rescue_alone():
    groups = [_group("a", 10), _group("big", 30, part=1, parts=2), _group("big", 30, part=2, parts=2),
              _group("b", 10), _group(RESCUE_KEY, 5)]
    packed = pack(groups, 60)
    assert [(g.key, g.part) for g in packed] == [("a+b", 1), ("big", 1), ("big", 2), (RESCUE_KEY, 1)]


def test_a_packed_search_makes_fewer_selection_calls_and_finds_the_same():
    tree = sample_tree()
    query = "book a flight and check the rain"   # two groups: Flights and Weather
    found = {}
    for packed in (False, True):
        oracle = Oracle(tree, {query: {"f2", "w1"}})
        config = descent_config(merge_threshold=0, pack_groups=packed, prerank_min=0)
        answer = A2XSearch(tree, sample_services(), ScriptedEngine(oracle), config).search(query)
        found[packed] = (sorted(answer.ids), len(answer.trace["selection"]), answer.cost.prompt_tokens)
    assert found[True][0] == found[False][0] and found[True][0]
    assert found[True][1] == 1 < found[False][1]
    assert found[True][2] < found[False][2]


def test_pre_ranked_lists_take_the_longer_named_cap():
    tree, services = sample_tree(), sample_services()
    config = descent_config(group_cap=3, named_group_cap=50, prerank_min=2)
    assert A2XSearch(tree, services, ScriptedEngine(lambda r: "1"), config).group_cap == 3   # no ranker
    ranked = A2XSearch(tree, services, ScriptedEngine(lambda r: "1"), config, ranker=object())
    assert ranked.group_cap == 50
    held = descent_config(group_cap=3, named_group_cap=50, prerank_min=2, prerank_rest="round")
    assert A2XSearch(tree, services, ScriptedEngine(lambda r: "1"), held, ranker=object()).group_cap == 3


def _catalogue(texts: list[str]) -> list[str]:
    return [text for text in texts for _ in range(3)]


def test_the_language_line_goes_only_where_request_and_catalogue_differ():
    english = LanguageHint(_catalogue(["Returns the weather forecast for a city and the time of day",
                                       "Books a table at a restaurant for the given number of people"]))
    assert english.language == "English" and not english.mixed
    assert not english.needed("what is the weather in Paris tomorrow")
    assert english.needed("明天巴黎的天气怎么样")
    chinese = LanguageHint(_catalogue(["返回一个城市的天气预报", "为指定人数预订餐厅的座位"]))
    assert chinese.needed("what is the weather in Paris tomorrow") and not chinese.needed("明天巴黎的天气怎么样")
    mixed = LanguageHint(["Returns the weather forecast for a city and the time of day",
                          "返回一个城市的天气预报和当地时间"])
    assert mixed.mixed and mixed.needed("what is the weather in Paris tomorrow")
    assert LanguageHint(["anything"], "always").needed("the weather in the city")
    assert not LanguageHint(["anything"], "never").needed("明天巴黎的天气怎么样")


def test_the_search_adds_the_line_to_every_prompt_of_a_query_in_another_language():
    tree = sample_tree()
    services = {sid: Service(sid, "generic", f"tool_{sid}", "Returns the data of the service for the user.")
                for sid in tree.service_ids()}
    seen = {}
    for query in ("book a flight for me", "帮我订一张机票"):
        oracle = Oracle(tree, {query: {"f1"}})
        A2XSearch(tree, services, ScriptedEngine(oracle), descent_config()).search(query)
        seen[query] = [ACROSS in r.messages[0]["content"] for r in oracle.seen]
    assert seen["book a flight for me"] and not any(seen["book a flight for me"])
    assert seen["帮我订一张机票"] and all(seen["帮我订一张机票"])
