"""Answer constraints (bounded, compilable, positions only) and prompt files (one per call type, hashed)."""

from __future__ import annotations

import json
import re

import pytest
from pydantic import ValidationError

from a2x_local.llm.constraints import grammar_problem
from a2x_local.llm.types import JsonConstraint, RegexConstraint
from a2x_local.taxonomy import prompts
from a2x_local.taxonomy.config import BuildConfig
from a2x_local.taxonomy.induction.assign import one_regex
from a2x_local.taxonomy.induction.calls import system_values
from a2x_local.taxonomy.induction.schemas import (
    design_model,
    keywords_item,
    lines_regex,
    number_pattern,
    parse_lines,
    parse_positions,
    placement_item,
    positions_item,
    validation_model,
)
from tests.taxonomy.rules import categories_json


@pytest.mark.parametrize("n", [1, 9, 10, 19, 20, 99, 100, 137, 999])
def test_number_pattern_matches_exactly_one_to_n(n):
    pattern = number_pattern(n)
    accepted = {i for i in range(0, 1100) if re.fullmatch(pattern, str(i))}
    assert accepted == set(range(1, n + 1))
    assert not re.fullmatch(pattern, "01")


def test_position_lines_are_bounded_by_the_offered_categories():
    pattern = lines_regex(3, positions_item(12, 3))
    assert re.fullmatch(pattern, "1: 3\n2: NONE\n3: 12,1, 7")
    assert not re.fullmatch(pattern, "1: 13\n2: NONE\n3: 1")            # no category 13
    assert not re.fullmatch(pattern, "1: 1,2,3,4\n2: NONE\n3: 1")       # at most 3 positions
    assert not re.fullmatch(pattern, "1: 1\n2: NONE")                   # one line per service
    assert parse_positions("12,1, 12") == [12, 1] and parse_positions("NONE") == []
    assert parse_lines("1: 3\n2: NONE", 2) == ["3", "NONE"]
    assert re.fullmatch(placement_item(4), "3 85") and not re.fullmatch(placement_item(4), "5 85")
    assert not re.fullmatch(placement_item(4), "3 101")


def test_keywords_are_lower_snake_case():
    config = BuildConfig.defaults(keywords_per_service_max=2, keyword_max_chars=12)
    pattern = lines_regex(1, keywords_item(config))
    assert re.fullmatch(pattern, "1: weather, stock_market")
    for bad in ("1: Weather", "1: stock market", "1: a, b, c", "1: averyveryverylongword"):
        assert not re.fullmatch(pattern, bad), bad


def test_design_schema_enforces_at_most_n_and_bounds_every_string():
    config = BuildConfig.defaults(max_children=3, name_max_chars=10)
    model = design_model(config, 2, 3)
    model.model_validate_json(categories_json(["a", "b", "c"]))
    with pytest.raises(ValidationError):
        model.model_validate_json(categories_json(["a", "b", "c", "d"]))
    with pytest.raises(ValidationError):
        model.model_validate_json(categories_json(["a"]))
    too_long = json.loads(categories_json(["a", "b"]))
    too_long["categories"][0]["name"] = "x" * 11
    with pytest.raises(ValidationError):
        model.model_validate(too_long)
    schema = json.dumps(model.model_json_schema())
    assert '"maxItems": 3' in schema and '"maxLength": 10' in schema
    revised = design_model(config, 2, 3, with_source=4)
    with pytest.raises(ValidationError):
        revised.model_validate_json(categories_json(["a", "b"], sources=[5, 0]))   # no current category 5


def test_every_build_constraint_compiles_for_the_structured_output_backend():
    config = BuildConfig.defaults()
    constraints = [
        JsonConstraint(design_model(config, config.min_children, config.max_children)),
        JsonConstraint(design_model(config, config.min_children, config.max_children, with_source=20)),
        JsonConstraint(design_model(config, 1, 5)),
        JsonConstraint(validation_model(20)),
        RegexConstraint(lines_regex(50, keywords_item(config))),
        RegexConstraint(lines_regex(15, positions_item(20, 7))),
        RegexConstraint(lines_regex(20, placement_item(137))),
        RegexConstraint(one_regex(config, positions_item(20, 7))),
    ]
    answer = "Reasoning: it books flights, so travel.\nCategories: 3,12"
    assert re.fullmatch(one_regex(config, positions_item(20, 7)), answer)
    assert not re.fullmatch(one_regex(config, positions_item(20, 7)), "Reasoning: a\nb\nCategories: 3")
    for constraint in constraints:
        assert grammar_problem(constraint) is None


def test_one_prompt_file_per_call_type_with_shared_instructions_first():
    for call_type in prompts.CALL_TYPES:
        values = {name: f"<{name}>" for name in re.findall(r"\$(\w+)", prompts.PROMPTS.files[call_type]
                                                             .split("<<<USER>>>")[1])}
        system_a, user_a = prompts.render(call_type, system=system_values(BuildConfig.defaults()), **values)
        system_b, _ = prompts.render(call_type, system=system_values(BuildConfig.defaults()),
                                     **{k: "other" for k in values})
        assert system_a == system_b                   # the system message never varies between requests
        assert "$" not in system_a["content"] and "$" not in user_a["content"]
    chinese = system_values(BuildConfig.defaults(category_language="Chinese"))
    design = prompts.render("design_descriptions", system=chinese, node_context="Travel",
                            services="- a: b")[0]["content"]
    assert "in Chinese, the language of the registry's services" in design
    auto = prompts.render("refine", system=system_values(BuildConfig.defaults()), **{
        name: "x" for name in re.findall(r"\$(\w+)", prompts.PROMPTS.files["refine"].split("<<<USER>>>")[1])})
    assert "in the language the services are written in" in auto[0]["content"]
    assert "No catch-alls" in design and "One classification axis" in design and "No technology" in design
    assert "No operation categories" in design and "User-scenario test" in design
    assert design.index("dimension") < design.index("for each category")


def test_prompt_hash_changes_with_any_prompt_file(monkeypatch):
    before = prompts.prompt_hash()
    monkeypatch.setitem(prompts.PROMPTS.files, "assign", prompts.PROMPTS.files["assign"] + " ")
    assert prompts.prompt_hash() != before and len(before) == 64
