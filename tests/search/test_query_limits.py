"""A query too long for the model's context is blamed on the query (it used to blame the tree's categories)."""

from __future__ import annotations

import pytest

from a2x_local.errors import UserError
from a2x_local.search.llm.a2x import A2XSearch
from a2x_local.testing import ScriptedEngine
from tests.search.a2x_helpers import descent_config, sample_services, sample_tree


def search_with_window(window: int) -> A2XSearch:
    engine = ScriptedEngine(lambda request: "NONE", context_window=window)
    return A2XSearch(sample_tree(), sample_services(), engine, descent_config())


def test_an_oversized_query_names_the_query():
    with pytest.raises(UserError) as caught:
        search_with_window(1024).search("book a flight " * 2000)
    assert caught.value.message.startswith("the query is too long") and "28,000 characters" in caught.value.message
    assert caught.value.code == "QueryTooLong" and "shorten the query" in caught.value.hint


def test_categories_that_do_not_fit_are_still_blamed_on_the_tree():
    with pytest.raises(UserError, match="options at tree node 'root' do not fit"):
        search_with_window(60).search("book a flight")
