"""MCP `tools/list` results: one service per tool, id `server/tool`, input schema kept in metadata.

Accepts the bare result `{"tools": [...]}` or the full JSON-RPC response `{"result": {"tools": [...]}}`. The server
name comes from `--server`, else a top-level `server` / `serverInfo.name` field, else the file name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from a2x_local.errors import InputError
from a2x_local.registry.formats._common import FORMAT_HINT, EntryReader, Limits, json_type
from a2x_local.registry.types import Service

NAME = "mcp-tools"
SUMMARY = "MCP tools/list result {\"tools\": [...]} (one service per tool, id server/tool)"


def _result(data: Any) -> Any:
    if isinstance(data, dict) and isinstance(data.get("result"), dict) and "tools" in data["result"]:
        return data["result"]
    return data


def matches(data: Any) -> bool:
    result = _result(data)
    return isinstance(result, dict) and "tools" in result


def _server_name(path: Path, data: Any, server: str | None) -> str:
    if server:
        return server
    if isinstance(data, dict):
        if isinstance(data.get("server"), str) and data["server"].strip():
            return data["server"].strip()
        info = data.get("serverInfo")
        if isinstance(info, dict) and isinstance(info.get("name"), str) and info["name"].strip():
            return info["name"].strip()
    stem = path.stem
    for suffix in (".tools", "-tools", "_tools"):
        stem = stem.removesuffix(suffix)
    return stem


def parse(path: Path, data: Any, limits: Limits, *, server: str | None = None, **_: Any) -> list[Service]:
    result = _result(data)
    tools = result.get("tools")
    if not isinstance(tools, list):
        raise InputError(str(path), f"must be an array, got {json_type(tools)}", field="tools", hint=FORMAT_HINT)
    if not tools:
        raise InputError(str(path), "contains no tools", field="tools", hint=FORMAT_HINT)
    server_name = _server_name(path, data, server)
    services = []
    for index, item in enumerate(tools):
        reader = EntryReader(path, index, item, limits)
        tool_name = reader.text("name")
        reader.entry = f"{index} (tool {tool_name!r})"
        title = reader.text("title", required=False)
        metadata: dict[str, Any] = {"server": server_name, "tool": tool_name,
                                    "inputSchema": reader.mapping("inputSchema")}
        for optional in ("outputSchema", "annotations"):
            if optional in reader.data:
                metadata[optional] = reader.mapping(optional)
        if title:
            metadata["title"] = title
        services.append(reader.service(
            id=f"{server_name}/{tool_name}",
            type="mcp_tool",
            name=title.strip() if title and title.strip() else tool_name,
            description=reader.text("description"),
            metadata=metadata,
            id_field="name",
        ))
    return services
