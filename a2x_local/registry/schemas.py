"""A service's parameters as JSON Schema, whatever shape its description format gave them.

Formats describe parameters differently: an MCP tool's ``inputSchema`` is JSON Schema already; ToolRet entries carry
a map ``{"location": {"type": "str, optional", "description": ..., "required": false}}``, and some of them a JSON
Schema flattened into such a map with its parts as Python literals in the descriptions; OpenAI-style functions put
JSON Schema under ``parameters``; an OpenAPI operation lists ``parameters`` (``name``, ``in``, ``required``,
``schema``) and a ``requestBody``. An agent should not have to know any of that: `parameters_schema` gives one
JSON Schema object (``type: object``, ``properties``, ``required``) or None, checked with the `jsonschema` library
(a schema it refuses is None, never half of one). The original stays in the metadata as it came; the schema is
derived from it when read, so a registry ingested before this existed has schemas too and they never go stale.
MCP servers, A2A agents (they take messages, not parameters) and skills have none.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from typing import Any

from jsonschema import exceptions as schema_errors
from jsonschema import validators

MAX_LITERAL_CHARS = 20_000     # a flattened schema's Python literal longer than this is not parsed
_TYPES = {"str": "string", "string": "string", "text": "string", "int": "integer", "integer": "integer",
          "long": "integer", "float": "number", "number": "number", "double": "number", "decimal": "number",
          "bool": "boolean", "boolean": "boolean", "list": "array", "array": "array", "tuple": "array",
          "dict": "object", "object": "object", "map": "object", "null": "null", "none": "null"}
_GENERIC = re.compile(r"^(?:typing\.)?(list|dict|tuple|set|optional|array)\[(.*)\]$", re.IGNORECASE)


def parameters_schema(metadata: Any) -> dict[str, Any] | None:
    """The parameters of a service with this metadata as a JSON Schema object, or None when it describes none."""
    if not isinstance(metadata, Mapping):
        return None
    schema = None
    body = metadata.get("requestBody") if isinstance(metadata.get("requestBody"), Mapping) else None
    for key in ("inputSchema", "input_schema", "parameters"):
        if key in metadata:
            value = metadata[key]
            schema = _openapi(value, body) if isinstance(value, list) else _any_shape(value)
            break
    else:
        function = metadata.get("function")
        if isinstance(function, Mapping) and "parameters" in function:
            schema = _any_shape(function["parameters"])
    if schema is None and body is not None:
        schema = _openapi([], body)
    return schema if schema is not None and _valid(schema) else None


def _any_shape(value: Any) -> dict[str, Any] | None:
    if isinstance(value, list):
        return _openapi(value, None)
    if not isinstance(value, Mapping):
        return None
    if _is_json_schema(value):
        return _json_schema(value)
    flattened = _flattened(value)
    if flattened is not None:
        return flattened
    return _parameter_map(value)


def _is_json_schema(value: Mapping[str, Any]) -> bool:
    properties = value.get("properties")
    return (value.get("type") == "object" and (properties is None or isinstance(properties, Mapping))) or (
        isinstance(properties, Mapping) and all(isinstance(p, Mapping) for p in properties.values())
        and not isinstance(value.get("type"), Mapping))


def _json_schema(value: Mapping[str, Any]) -> dict[str, Any]:
    schema = {key: item for key, item in value.items() if key != "optional"}
    schema["type"] = "object"
    schema["properties"] = {str(name): _property(spec) for name, spec in (value.get("properties") or {}).items()}
    required = value.get("required")
    if isinstance(required, list):
        schema["required"] = [name for name in required if isinstance(name, str) and name in schema["properties"]]
    else:
        schema.pop("required", None)
    return schema


def _literal(text: Any) -> Any:
    if not isinstance(text, str) or len(text) > MAX_LITERAL_CHARS:
        return None
    try:
        return ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None


def _flattened(value: Mapping[str, Any]) -> dict[str, Any] | None:
    """A JSON Schema written into a ToolRet map: ``type`` says "dict", ``properties`` holds a Python literal."""
    holder = value.get("properties")
    if not (isinstance(value.get("type"), Mapping) and isinstance(holder, Mapping)):
        return None
    properties = _literal(holder.get("description"))
    if not isinstance(properties, dict) or not all(isinstance(p, dict) for p in properties.values()):
        return None
    required = _literal(value["required"].get("description")) if isinstance(value.get("required"), Mapping) else []
    return _json_schema({"type": "object", "properties": properties,
                         "required": required if isinstance(required, list) else []})


def _parameter_map(value: Mapping[str, Any]) -> dict[str, Any] | None:
    """ToolRet's ``{name: {"type", "description", "required"}}``; "str, optional" marks an optional one."""
    properties, required = {}, []
    for name, spec in value.items():
        if not isinstance(spec, Mapping):
            return None
        properties[str(name)] = _property(spec)
        flag = spec.get("required")
        optional = isinstance(spec.get("type"), str) and "optional" in spec["type"].lower()
        if (flag is True or (isinstance(flag, str) and flag.strip().lower() == "true")) and not optional:
            required.append(str(name))
    return {"type": "object", "properties": properties, "required": required}


def _openapi(parameters: list[Any], body: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """An OpenAPI operation's parameters (path, query, header) and its JSON request body, as one object."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    for parameter in parameters:
        if not isinstance(parameter, Mapping) or not isinstance(parameter.get("name"), str):
            return None
        spec = dict(parameter.get("schema") or {}) if isinstance(parameter.get("schema"), Mapping) else {
            key: parameter[key] for key in ("type", "enum", "items", "format") if key in parameter}
        if isinstance(parameter.get("description"), str):
            spec.setdefault("description", parameter["description"])
        properties[parameter["name"]] = _property(spec)
        if parameter.get("required") is True:
            required.append(parameter["name"])
    content = body.get("content") if body is not None else None
    media = content.get("application/json") if isinstance(content, Mapping) else None
    if isinstance(media, Mapping) and isinstance(media.get("schema"), Mapping):
        inner = _json_schema(media["schema"]) if _is_json_schema(media["schema"]) else None
        if inner is not None:
            properties.update(inner["properties"])
            required += [name for name in inner.get("required", []) if name not in required]
    return {"type": "object", "properties": properties, "required": required} if properties or parameters else None


def _type(text: str) -> dict[str, Any]:
    """A Python or loose type name ("str, optional", "List[int]", "dict") as JSON Schema keywords."""
    name = text.split(",")[0].strip()
    generic = _GENERIC.match(name)
    if generic:
        outer, inner = generic.group(1).lower(), generic.group(2)
        if outer == "optional":
            return _type(inner)
        if outer in ("list", "tuple", "set", "array"):
            return {"type": "array", "items": _type(inner.split(",")[0])} if inner.strip() else {"type": "array"}
        return {"type": "object"}
    mapped = _TYPES.get(name.lower())
    return {"type": mapped} if mapped else {}


def _property(spec: Any) -> dict[str, Any]:
    """One property in JSON Schema terms: loose type names mapped, ToolRet's per-property ``required`` dropped
    (it belongs in the object's ``required`` list), nested objects and arrays normalised too."""
    if not isinstance(spec, Mapping):
        return {}
    result = {key: value for key, value in spec.items() if key not in ("required", "optional", "type")}
    kind = spec.get("type")
    if isinstance(kind, str):
        result.update(_type(kind))
    elif isinstance(kind, list) and all(isinstance(k, str) for k in kind):
        result["type"] = kind
    if isinstance(result.get("properties"), Mapping):
        result["properties"] = {str(n): _property(p) for n, p in result["properties"].items()}
        result.setdefault("type", "object")
    if isinstance(spec.get("required"), list):
        result["required"] = [n for n in spec["required"] if isinstance(n, str)]
    if isinstance(result.get("items"), Mapping):
        result["items"] = _property(result["items"])
    return result


def _valid(schema: dict[str, Any]) -> bool:
    try:
        validators.validator_for(schema).check_schema(schema)
    except (schema_errors.SchemaError, schema_errors.UnknownType):
        return False
    return True
