"""Every service's parameters as JSON Schema, whatever shape its format gave them (issue 33, item 8); the original
metadata kept; search hits say whether a schema exists."""

from __future__ import annotations

import json

from jsonschema import Draft202012Validator

from a2x_local.registry import Service
from a2x_local.registry.schemas import parameters_schema
from tests.support.paths import DATA


def _checked(metadata: dict) -> dict:
    schema = parameters_schema(metadata)
    assert schema is not None and schema["type"] == "object"
    Draft202012Validator.check_schema(schema)
    return schema


def test_a_toolret_parameter_map_becomes_json_schema() -> None:
    schema = _checked({"inputSchema": {
        "location": {"type": "str", "description": "the city", "required": "true"},
        "days": {"type": "int, optional", "description": "how many", "required": False},
        "tags": {"type": "List[str]", "description": "labels", "required": False}}})
    assert schema["properties"] == {"location": {"type": "string", "description": "the city"},
                                    "days": {"type": "integer", "description": "how many"},
                                    "tags": {"type": "array", "items": {"type": "string"}, "description": "labels"}}
    assert schema["required"] == ["location"]
    Draft202012Validator(schema).validate({"location": "Paris", "days": 2})


def test_a_json_schema_flattened_into_a_toolret_map_is_recovered() -> None:
    schema = _checked({"inputSchema": {
        "type": {"type": "string", "description": "dict", "required": False},
        "properties": {"type": "string", "description": "{'city': {'type': 'string', 'description': 'A city'}, "
                                                        "'rating': {'type': 'float'}}", "required": False},
        "required": {"type": "string", "description": "['city']", "required": False}}})
    assert schema["properties"] == {"city": {"type": "string", "description": "A city"}, "rating": {"type": "number"}}
    assert schema["required"] == ["city"]


def test_an_mcp_input_schema_stays_as_it_is() -> None:
    given = {"type": "object", "properties": {"page": {"type": "string"}}, "required": ["page"]}
    assert _checked({"inputSchema": given}) == given


def test_openai_functions_and_openapi_operations() -> None:
    function = {"function": {"name": "f", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}
    assert _checked(function)["properties"] == {"q": {"type": "string"}}
    operation = {"parameters": [{"name": "id", "in": "path", "required": True, "schema": {"type": "integer"}},
                                {"name": "lang", "in": "query", "description": "language",
                                 "schema": {"type": "string"}}],
                 "requestBody": {"content": {"application/json": {"schema": {
                     "type": "object", "properties": {"note": {"type": "string"}}, "required": ["note"]}}}}}
    schema = _checked(operation)
    assert set(schema["properties"]) == {"id", "lang", "note"} and schema["required"] == ["id", "note"]
    assert schema["properties"]["lang"] == {"type": "string", "description": "language"}


def test_services_without_parameters_or_with_a_broken_schema_have_none() -> None:
    assert parameters_schema({"url": "https://example.org"}) is None             # an MCP server, an A2A card
    assert parameters_schema({"inputSchema": {"type": "object", "properties": {"x": {"minLength": -1}}}}) is None
    assert parameters_schema({"inputSchema": "not a schema"}) is None
    assert parameters_schema(None) is None


def test_every_toolret_entry_with_parameters_gets_a_valid_schema_and_keeps_its_original() -> None:
    entries = json.loads((DATA / "sample" / "toolret_tools.json").read_text(encoding="utf-8"))
    with_parameters = [e for e in entries if e.get("metadata", {}).get("inputSchema")]
    assert with_parameters
    for entry in with_parameters:
        original = json.loads(json.dumps(entry["metadata"]))
        service = Service(entry["id"], "generic", entry["name"], entry["description"], entry["metadata"])
        schema = service.parameters_schema
        assert schema is not None, entry["id"]
        Draft202012Validator.check_schema(schema)
        assert service.metadata == original and service.to_dict()["parameters_schema"] == schema


def test_show_gives_the_schema_and_search_hits_say_whether_one_exists(cli) -> None:
    code, _, err = cli("ingest", str(DATA / "sample" / "toolret_tools.json"))
    assert code == 0, err
    code, out, err = cli("search", "weather forecast for a city", "--method", "bm25", "--k", "5", "--json")
    assert code == 0, err
    hits = json.loads(out)["hits"]
    assert hits and all(isinstance(hit["has_schema"], bool) for hit in hits) and any(h["has_schema"] for h in hits)
    first = next(hit for hit in hits if hit["has_schema"])
    service_id = first.get("service_id", first.get("id"))
    code, out, err = cli("services", "show", service_id, "--json")
    assert code == 0, err
    shown = json.loads(out)
    Draft202012Validator.check_schema(shown["parameters_schema"])
    assert "inputSchema" in shown["metadata"]                                     # the original kept
    code, out, _ = cli("services", "show", service_id)
    assert code == 0 and "parameters (JSON Schema):" in out
