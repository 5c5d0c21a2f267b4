"""The openai engine's request shapes and URL handling, without a server (nothing is contacted)."""

from __future__ import annotations

import pytest

from a2x_local.errors import UserError
from a2x_local.llm import JsonConstraint, RegexConstraint, Request
from a2x_local.llm.config import OpenAIConfig
from a2x_local.llm.openai_engine import OpenAIEngine, _same_model, normalise_base_url
from a2x_local.llm.types import ChoiceConstraint
from tests.llm.engine_cases import POSITIONS, Pick


def test_base_url_gets_the_v1_path_only_when_it_has_none() -> None:
    assert normalise_base_url("http://127.0.0.1:8000") == "http://127.0.0.1:8000/v1"
    assert normalise_base_url("http://127.0.0.1:8000/v1/") == "http://127.0.0.1:8000/v1"
    assert normalise_base_url("https://gpu-box.lan/llm/v1") == "https://gpu-box.lan/llm/v1"
    with pytest.raises(UserError, match="not an http"):
        normalise_base_url("127.0.0.1:8000")


def test_request_body_carries_budget_seed_and_the_constraint() -> None:
    engine = OpenAIEngine(OpenAIConfig.defaults(base_url="http://127.0.0.1:9"), model="tiny")
    messages = [{"role": "user", "content": "pick"}]
    regex = engine._request_body(Request(messages, RegexConstraint(POSITIONS), max_tokens=12, seed=7))
    assert regex == {"model": "tiny", "messages": messages, "max_tokens": 12, "temperature": 0.0, "seed": 7,
                     "extra_body": {"structured_outputs": {"regex": POSITIONS}}}
    choice = engine._request_body(Request(messages, ChoiceConstraint(("a", "b"))))
    assert choice["extra_body"] == {"structured_outputs": {"choice": ["a", "b"]}} and "seed" not in choice
    json_body = engine._request_body(Request(messages, JsonConstraint(Pick)))
    assert json_body["response_format"]["json_schema"]["schema"] == Pick.model_json_schema()
    assert "extra_body" not in json_body


def test_served_names_match_aliases_folders_and_repositories() -> None:
    assert _same_model("Qwen/Qwen2.5-7B-Instruct", "Qwen2.5-7B-Instruct")
    assert _same_model("/models/Qwen2.5-7B-Instruct", "Qwen2.5-7B-Instruct")
    assert _same_model("tiny", "tiny")
    assert not _same_model("Qwen/Qwen2.5-7B-Instruct", "7B-Instruct")
