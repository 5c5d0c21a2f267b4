"""A model that writes on (issue 31): every build answer is bounded by its schema or regex, text a model kept
repeating is cut where the repetition starts and counted, and answers cut off at their token budget are counted
and stop the build with a message that says so."""

from __future__ import annotations

import pytest

from a2x_local.llm import Usage
from a2x_local.taxonomy.induction.builder import BuildAborted, Builder
from a2x_local.taxonomy.induction.repetition import cut_repetition
from a2x_local.taxonomy.induction.report import build_report, summary_rows
from a2x_local.taxonomy.induction.state import BuildState
from a2x_local.testing import Rambler, ScriptedEngine, WordPolicy
from tests.taxonomy.helpers import build, small_config, synthetic

DOMAINS = ["weather", "travel", "payments", "music", "health"]


@pytest.mark.parametrize(("text", "kept"), [
    ("Weather forecasts. Weather forecasts. Weather forecasts. Weath", "Weather forecasts."),
    ("New York York York City", "New York"),
    ("Payments, payments, PAYMENTS and more", "Payments"),
    ("Services for weather and travel", "Services for weather and travel"),
    ("very very good", "very very good"),             # twice is not a loop
    ("a  b\n c", "a b c"),                            # one line, single spaces
])
def test_repetition_is_cut_where_it_starts(text, kept):
    assert cut_repetition(text)[0] == kept
    assert cut_repetition(text)[1] == (kept != " ".join(text.split()))


def test_a_model_that_repeats_itself_up_to_the_schema_bound_builds_the_same_tree_with_its_texts_cut():
    services = synthetic(DOMAINS, 12)
    config = small_config(max_depth=2)
    plain_state, plain_engine = build(services, config, WordPolicy(services))
    state, engine = build(services, config, Rambler(WordPolicy(services)))
    # The answers really were long and repetitive (every string run to its schema's bound), and all valid.
    label = "design_descriptions"
    assert engine.usage.by_label[label].completion_tokens > plain_engine.usage.by_label[label].completion_tokens
    assert engine.usage.total().failures == 0
    names = sorted(node.name for node in state.nodes.values())
    assert names == sorted(node.name for node in plain_state.nodes.values())
    texts = [t for node in state.nodes.values() for t in (node.name, node.description, node.boundary)]
    assert not any(cut_repetition(t)[1] for t in texts)
    assert state.counters["repeated_text_cut"] >= len(state.nodes) - 1       # every category's name at least
    rows = dict(summary_rows(build_report(state, state.tree(), config, engine.usage)))
    assert rows["texts cut where they repeated themselves"] == f"{state.counters['repeated_text_cut']:,}"
    assert "attempts cut off at their token budget" not in rows


def test_a_model_that_never_stops_is_cut_off_counted_and_stops_the_build_saying_why():
    services = synthetic(DOMAINS, 12)
    engine = ScriptedEngine(Rambler(WordPolicy(services), bounded=False))
    builder = Builder(BuildState.start(sorted(s.id for s in services)), {s.id: s for s in services},
                      small_config(max_depth=2), engine)
    with pytest.raises(BuildAborted, match="2 attempts were cut off at their token budget"):
        while not builder.finished:
            builder.step()
    stats = engine.usage.by_label["design_descriptions"]
    assert stats.truncated == stats.calls == 2 and stats.failures == 1      # the first try and the retry
    assert builder.state.rounds[-1]["truncated"] == 2
    table = Usage.from_dict(engine.usage.to_dict()).table()
    assert "cut off" in [column.header for column in table.columns]
