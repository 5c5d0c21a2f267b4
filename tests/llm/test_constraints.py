"""Constraint -> backend parameter mapping: vLLM, OpenAI-compatible body, llguidance grammars."""

from __future__ import annotations

import json
from typing import Annotated, Literal

import llguidance
import pytest
from pydantic import BaseModel, Field

from a2x_local.llm.constraints import (
    closed_schema,
    constraint_key,
    grammar_problem,
    llguidance_grammar,
    openai_body,
    vllm_structured_outputs,
)
from a2x_local.llm.types import ChoiceConstraint, JsonConstraint, RegexConstraint
from a2x_local.llm.vllm_engine import structured_outputs_config

POSITIONS = r"NONE|[1-9][0-9]?(,[1-9][0-9]?){0,9}"


class Inner(BaseModel):
    name: str = Field(max_length=20)


class Pick(BaseModel):
    category: Literal["alpha", "beta"]
    ids: list[Annotated[int, Field(ge=1, le=99)]] = Field(min_length=1, max_length=3)
    inner: Inner


def test_vllm_mapping_uses_one_field_per_kind() -> None:
    assert vllm_structured_outputs(JsonConstraint(Pick)) == {"json": Pick.model_json_schema()}
    assert vllm_structured_outputs(RegexConstraint(POSITIONS)) == {"regex": POSITIONS}
    assert vllm_structured_outputs(ChoiceConstraint(("a", "a b"))) == {"choice": ["a", "a b"]}


def test_vllm_mapping_is_accepted_by_structured_outputs_params() -> None:
    from vllm.sampling_params import StructuredOutputsParams

    for constraint in (JsonConstraint(Pick), RegexConstraint(POSITIONS), ChoiceConstraint(("x",))):
        params = StructuredOutputsParams(**vllm_structured_outputs(constraint))
        assert not params.all_constraints_none()


def test_openai_body_uses_response_format_for_json_and_structured_outputs_otherwise() -> None:
    body = openai_body(JsonConstraint(Pick))
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"] == {"name": "Pick", "schema": Pick.model_json_schema(),
                                                      "strict": True}
    assert openai_body(RegexConstraint(POSITIONS)) == {"structured_outputs": {"regex": POSITIONS}}
    assert openai_body(ChoiceConstraint(("a", "b"))) == {"structured_outputs": {"choice": ["a", "b"]}}
    # The legacy fields are silently ignored by current servers: they must never be produced.
    for constraint in (JsonConstraint(Pick), RegexConstraint("x"), ChoiceConstraint(("a",))):
        assert not any(key.startswith("guided_") for key in json.dumps(openai_body(constraint)).split('"'))


def test_default_engine_config_is_guidance_with_both_flags() -> None:
    assert structured_outputs_config("guidance") == {
        "backend": "guidance", "disable_any_whitespace": True, "disable_additional_properties": True}
    assert structured_outputs_config("outlines") == {"backend": "outlines"}


def test_closed_schema_closes_every_object_without_touching_the_original() -> None:
    schema = Pick.model_json_schema()
    closed = closed_schema(schema)
    assert closed["additionalProperties"] is False
    assert closed["$defs"]["Inner"]["additionalProperties"] is False
    assert "additionalProperties" not in schema


def test_constraint_key_identifies_equal_constraints_and_keeps_property_order() -> None:
    assert constraint_key(RegexConstraint("a+")) == constraint_key(RegexConstraint("a+"))
    assert constraint_key(RegexConstraint("a+")) != constraint_key(ChoiceConstraint(("a+",)))
    kind, spec = constraint_key(JsonConstraint(Pick))
    assert kind == "json" and list(json.loads(spec)["properties"]) == ["category", "ids", "inner"]


@pytest.mark.parametrize("constraint", [JsonConstraint(Pick), RegexConstraint(POSITIONS),
                                        ChoiceConstraint(("sales", "sales lead"))])
def test_llguidance_grammars_compile(constraint) -> None:
    grammar = llguidance_grammar(constraint)
    assert llguidance.LLMatcher.validate_grammar(grammar) == ""
    assert grammar_problem(constraint) is None


def test_llguidance_json_grammar_forbids_free_whitespace() -> None:
    grammar = json.loads(llguidance_grammar(JsonConstraint(Pick)))
    schema = grammar["grammars"][0]["json_schema"]
    assert schema["x-guidance"] == {"whitespace_flexible": False}
    assert schema["additionalProperties"] is False


def test_grammar_problem_explains_a_malformed_regex() -> None:
    problem = grammar_problem(RegexConstraint("[a-"))
    assert problem is not None and "regex" in problem and "unclosed character class" in problem
