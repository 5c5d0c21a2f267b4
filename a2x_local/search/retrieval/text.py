"""The text that stands for a service in the retrieval indexes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from a2x_local.registry import Service
from a2x_local.search.retrieval.config import TextOptions


def parameter_names(metadata: Mapping[str, Any]) -> list[str]:
    """Parameter names from ``metadata.inputSchema``, in schema order.

    Two shapes occur in real registries: JSON Schema (MCP tools: ``{"type": "object", "properties": {...}}``) and
    a plain ``{name: {type, description}}`` map (ToolRet); anything else yields no names rather than an error,
    because the parameters only enrich the text.
    """
    schema = metadata.get("inputSchema") if isinstance(metadata, Mapping) else None
    if not isinstance(schema, Mapping):
        return []
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        return [str(name) for name in properties]
    return [str(name) for name, value in schema.items() if isinstance(value, Mapping)]


BODY_CHARS = 2000   # SkillWeaver's body-aware text: name ⊕ description ⊕ body[:2000]


def service_text(service: Service, options: TextOptions) -> str:
    """`name: description` (or the description alone), optionally followed by the parameter names and, for a
    skill, the first 2,000 characters of its body."""
    text = service.text if options.text == "name_description" else service.description
    if options.body and isinstance(service.metadata, Mapping):
        body = service.metadata.get("body_excerpt")
        if isinstance(body, str) and body.strip():
            text = f"{text}\n{body.strip()[:BODY_CHARS]}"
    if options.params:
        names = parameter_names(service.metadata)
        if names:
            text = f"{text} Parameters: {', '.join(names)}."
    return text


def service_texts(services: Sequence[Service], options: TextOptions) -> list[str]:
    return [service_text(service, options) for service in services]
