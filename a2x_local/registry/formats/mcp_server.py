"""MCP registry `server.json` documents: one service per server.

Accepts a single document, a list of them, or a registry listing `{"servers": [...]}` whose items are documents
or `{"server": document, "_meta": ...}` wrappers (the registry API's shape).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from a2x_local.errors import InputError
from a2x_local.registry.formats._common import FORMAT_HINT, EntryReader, Limits, json_type
from a2x_local.registry.types import Service

NAME = "mcp-server"
SUMMARY = "MCP registry server.json (one document, a list, or {\"servers\": [...]})"

_MARKERS = ("packages", "remotes", "repository", "websiteUrl", "version_detail")


def _is_document(item: Any) -> bool:
    if not isinstance(item, dict):
        return False
    if isinstance(item.get("server"), dict):
        return True
    schema = item.get("$schema", "")
    return "name" in item and (
        (isinstance(schema, str) and "server.schema" in schema) or any(key in item for key in _MARKERS)
    )


def _documents(data: Any) -> Any:
    if isinstance(data, dict) and "servers" in data:
        return data["servers"]
    return data if isinstance(data, list) else [data]


def matches(data: Any) -> bool:
    documents = _documents(data)
    return isinstance(documents, list) and bool(documents) and _is_document(documents[0])


def parse(path: Path, data: Any, limits: Limits, **_: Any) -> list[Service]:
    documents = _documents(data)
    if not isinstance(documents, list):
        raise InputError(str(path), f"'servers' must be an array, got {json_type(documents)}", field="servers",
                         hint=FORMAT_HINT)
    if not documents:
        raise InputError(str(path), "contains no servers", hint=FORMAT_HINT)
    services = []
    for index, item in enumerate(documents):
        wrapper = EntryReader(path, index, item, limits)
        document = wrapper.mapping("server") if "server" in wrapper.data else wrapper.data
        reader = EntryReader(path, index, document, limits)
        server_name = reader.text("name")
        reader.entry = f"{index} (server {server_name!r})"
        title = reader.text("title", required=False)
        metadata = dict(document)
        if document is not item:
            metadata["_registry_meta"] = item.get("_meta", {})
        services.append(reader.service(
            id=server_name,
            type="mcp_server",
            name=title.strip() if title and title.strip() else server_name,
            description=reader.text("description"),
            metadata=metadata,
        ))
    return services
