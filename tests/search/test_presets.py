"""Presets of the [search] levers (`[search] preset`, `--preset`), and the selection-list layouts that let an
engine's prefix cache serve what queries share (`group_lists`)."""

from __future__ import annotations

import json

import pytest

from a2x_local.errors import UserError
from a2x_local.search.llm.a2x import A2XSearch
from a2x_local.search.llm.config import LlmSearchConfig
from a2x_local.search.llm.prompting import REQUEST_MARK
from a2x_local.search.types import SearchRequest
from a2x_local.settings import load_settings, packaged_defaults
from a2x_local.testing import ScriptedEngine
from tests.search.a2x_helpers import Oracle, sample_services, sample_tree, store_registry_and_tree

LEVERS = ("category_lines", "service_lines", "prerank_min", "pack_groups", "group_lists")


def _levers(config: LlmSearchConfig) -> tuple:
    return tuple(getattr(config, key) for key in LEVERS)


def test_each_packaged_preset_sets_its_levers_and_the_default_is_the_table_as_it_is():
    settings = load_settings()
    presets = packaged_defaults()["search_presets"]
    assert {"default", "published", "lean"} <= set(presets) and presets["default"] == {}
    published = LlmSearchConfig.from_settings(settings, preset="published")
    assert (published.category_lines, published.service_lines, published.prerank_min, published.pack_groups) == (
        "full", "full", 0, False)
    assert published.group_lists == "merged" and published.preset == "published"
    lean = LlmSearchConfig.from_settings(settings, preset="lean")
    assert (lean.category_lines, lean.service_lines, lean.compact_service_chars, lean.prerank_min) == (
        "compact", "compact", 60, 5)
    table = packaged_defaults()["search"]
    default = LlmSearchConfig.from_settings(settings)
    assert default.preset == "default" and _levers(default) == tuple(table[key] for key in LEVERS)


def test_options_win_over_the_preset_and_the_preset_over_the_table():
    settings = load_settings().with_overrides("search", service_lines="compact", compact_service_chars=99)
    # Under the default preset the table's own keys count; a named preset replaces the keys it lists.
    assert LlmSearchConfig.from_settings(settings).compact_service_chars == 99
    assert LlmSearchConfig.from_settings(settings, preset="published").service_lines == "full"
    compact = LlmSearchConfig.from_settings(settings, preset="published", service_lines="compact")
    assert compact.service_lines == "compact"
    # `[search] preset` in a config file picks it too, and a flag's preset wins over it.
    chosen = settings.with_overrides("search", preset="lean")
    from_file = LlmSearchConfig.from_settings(chosen)
    assert from_file.prerank_min == 5 and from_file.preset == "lean"
    assert LlmSearchConfig.from_settings(chosen, preset="published").prerank_min == 0


def test_an_unknown_preset_or_a_preset_with_an_unknown_key_is_a_clear_error():
    settings = load_settings()
    with pytest.raises(UserError, match="unknown search preset 'fastest'") as error:
        LlmSearchConfig.from_settings(settings, preset="fastest")
    assert "published" in error.value.hint and "[search_presets.fastest]" in error.value.hint
    config = dict(settings.config, search_presets={**settings.config["search_presets"], "mine": {"colour": "red"}})
    with pytest.raises(UserError, match=r"\[search_presets\.mine\] sets unknown \[search\] keys: colour"):
        LlmSearchConfig.load(config, preset="mine")
    mine = dict(config, search_presets={**config["search_presets"], "mine": {"group_cap": 7}})
    assert LlmSearchConfig.load(mine, preset="mine").group_cap == 7


# A query reaching Flights and Stocks (f1 sits on both), and one reaching Flights alone.
WANTED = {"fly and invest": {"f2", "s1"}, "fly somewhere": {"f3"}, "invest": {"s2"}}


def _selection_prompts(lists: str, query: str, merge_threshold: int = 30) -> dict[str, str]:
    oracle = Oracle(sample_tree(), WANTED)
    config = LlmSearchConfig.defaults(preset="published", group_lists=lists, merge_threshold=merge_threshold)
    method = A2XSearch(sample_tree(), sample_services(), ScriptedEngine(oracle), config)
    answer = method.search_batch([SearchRequest(query, mode="get_all")])[0]
    assert set(answer.ids) == WANTED[query]
    return {r.context["group"]: r.messages[1]["content"] for r in oracle.seen if r.context["call"] == "select"}


def test_per_node_lists_are_whole_node_lists_that_every_query_reaching_the_node_shares():
    both = _selection_prompts("per_node", "fly and invest")
    alone = _selection_prompts("per_node", "fly somewhere")
    # Travel's own service (t0) is a list of its own too: every query that enters Travel sees it (and, in the
    # published preset, the root's own services are a list every query sees).
    assert set(both) == {"root", "root/1", "root/1/1", "root/3/2"} and set(alone) == {"root", "root/1", "root/1/1"}
    assert both["root"].partition(REQUEST_MARK)[0] == alone["root"].partition(REQUEST_MARK)[0]
    # The Flights list is the same text for both queries up to the request; f1 is offered in both lists.
    assert both["root/1/1"].partition(REQUEST_MARK)[0] == alone["root/1/1"].partition(REQUEST_MARK)[0]
    assert "tool_f1" in both["root/1/1"] and "tool_f1" in both["root/3/2"]


def test_merged_lists_drop_what_an_earlier_list_offered_and_stable_ones_keep_every_list_whole():
    # Without merging, the published layout still removes f1 from Stocks for a query that reached Flights first:
    # the Stocks list then differs between queries. Stable lists keep it, so the list is the same for every query.
    merged = _selection_prompts("merged", "fly and invest", merge_threshold=0)
    merged_alone = _selection_prompts("merged", "invest", merge_threshold=0)
    assert "tool_f1" not in merged["root/3/2"] and "tool_f1" in merged_alone["root/3/2"]
    stable = _selection_prompts("stable", "fly and invest", merge_threshold=0)
    stable_alone = _selection_prompts("stable", "invest", merge_threshold=0)
    assert stable["root/3/2"].partition(REQUEST_MARK)[0] == stable_alone["root/3/2"].partition(REQUEST_MARK)[0]
    # Merged into one list (threshold 30), a stable list is the first node's list, whole, then the others'.
    (text,) = _selection_prompts("stable", "fly and invest").values()
    assert text.index("tool_t0") < text.index("tool_f1") < text.index("tool_s1") and text.count("tool_f1") == 1


def test_the_preset_flag_reaches_the_method_and_a_bad_one_is_refused(db_path, cli, monkeypatch, tmp_path,
                                                                     use_engine):
    store_registry_and_tree(db_path, sample_tree())
    # A preset of one's own in a config file: lists of one service each, easy to see in the requests.
    config = tmp_path / "config.toml"
    config.write_text('[search_presets.singles]\ngroup_cap = 1\nprerank_min = 0\npack_groups = false\n')
    monkeypatch.setenv("A2X_CONFIG", str(config))
    seen: list = []
    use_engine("scripted", lambda config: ScriptedEngine(_recording(seen)))
    code, out, err = cli("search", "fly and invest", "--method", "a2x", "--engine", "scripted", "--preset",
                         "singles", "--json")
    assert code == 0, err
    assert json.loads(out)["options"]["preset"] == "singles" and set(json.loads(out)["hits"][0]["service_id"]) != set()
    selection = [r for r in seen if r.context["call"] == "select"]
    assert len(selection) > 2 and all(len(r.context["options"]) == 1 for r in selection)
    seen.clear()
    code, _, err = cli("search", "fly and invest", "--method", "a2x", "--engine", "scripted", "-o",
                       "preset=published")
    assert code == 0, err
    assert any(len(r.context["options"]) > 1 for r in seen if r.context["call"] == "select")
    code, _, err = cli("search", "fly somewhere", "--method", "a2x", "--engine", "scripted", "--preset", "fastest")
    assert code == 1 and "unknown search preset 'fastest'" in err and "published" in err
    code, _, err = cli("search", "fly somewhere", "--method", "bm25", "--preset", "lean")
    assert code == 1 and "preset: unknown option" in err
    code, _, err = cli("serve", "--preset", "fastest")
    assert code == 2 and "unknown preset 'fastest'" in err
    code, _, err = cli("eval", "compare-presets", "--queries", tmp_path / "q.json", "--presets", "lean,fastest")
    assert code == 2 and "unknown preset(s) fastest" in err


def _recording(seen: list):
    oracle = Oracle(sample_tree(), WANTED)

    def rule(request):
        seen.append(request)
        return oracle(request)

    return rule


def test_a_misspelt_key_of_a_preset_of_ones_own_is_named_at_start(db_path, cli, monkeypatch, tmp_path):
    config = tmp_path / "config.toml"
    config.write_text('[search_presets.mine]\ngroup_capp = 3\n')
    monkeypatch.setenv("A2X_CONFIG", str(config))
    result = cli("search", "fly somewhere", "--method", "bm25")
    assert result.code == 1 and "unknown key 'group_capp' in [search_presets.\"mine\"]" in result.err
    assert "did you mean group_cap?" in result.err
