"""Indexed text: `name: description`, the description alone, and parameter names from either schema shape."""

from __future__ import annotations

from a2x_local.registry import Service
from a2x_local.search.retrieval.config import TextOptions
from a2x_local.search.retrieval.text import parameter_names, service_text

JSON_SCHEMA = {"inputSchema": {"type": "object", "properties": {"city": {}, "days": {}}, "required": ["city"]}}
TOOLRET_SHAPE = {"inputSchema": {"stock_code": {"type": "string"}, "time": {"type": "string"}}}


def test_parameter_names_from_both_schema_shapes() -> None:
    assert parameter_names(JSON_SCHEMA) == ["city", "days"]
    assert parameter_names(TOOLRET_SHAPE) == ["stock_code", "time"]
    assert parameter_names({}) == []
    assert parameter_names({"inputSchema": "not a schema"}) == []
    assert parameter_names({"inputSchema": {"type": "object"}}) == []


def test_service_text_options() -> None:
    service = Service("w", "generic", "getWeather", "Weather for a city.", JSON_SCHEMA)
    assert service_text(service, TextOptions()) == "getWeather: Weather for a city."
    assert service_text(service, TextOptions(text="description")) == "Weather for a city."
    assert service_text(service, TextOptions(params=True)) == "getWeather: Weather for a city. Parameters: city, days."
    plain = Service("p", "generic", "ping", "Check a host.")
    assert service_text(plain, TextOptions(params=True)) == "ping: Check a host."
    assert TextOptions().key() != TextOptions(params=True).key() != TextOptions(text="description").key()


def test_a_skill_body_joins_the_text_when_asked() -> None:
    body = "# PDF\nMerge, split. " * 200
    skill = Service("skill/pdf", "skill", "pdf", "Work with PDF files.", {"body_excerpt": body})
    assert service_text(skill, TextOptions()) == "pdf: Work with PDF files."
    with_body = service_text(skill, TextOptions(body=True))
    head = "pdf: Work with PDF files.\n"
    assert with_body.startswith(head + "# PDF") and len(with_body) == len(head) + 2000
    plain = Service("p", "generic", "ping", "Check a host.")
    assert service_text(plain, TextOptions(body=True)) == "ping: Check a host."
    assert TextOptions(body=True).key() != TextOptions().key()
