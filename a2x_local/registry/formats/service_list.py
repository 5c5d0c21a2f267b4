"""A2X / ToolRet service lists: a JSON array of {id, type, name, description, metadata}."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from a2x_local.errors import InputError
from a2x_local.registry.formats._common import FORMAT_HINT, EntryReader, Limits, json_type
from a2x_local.registry.types import Service

NAME = "a2x"
SUMMARY = "JSON array of {id, type, name, description, metadata} (A2X / ToolRet service lists)"


def matches(data: Any) -> bool:
    entries = data.get("services") if isinstance(data, dict) and len(data) <= 3 else data
    if not isinstance(entries, list) or not entries or not isinstance(entries[0], dict):
        return False
    # An id and a name are enough to recognise a list: an entry that lacks its description is then refused for that
    # field by `parse`, not as a file of unknown format (a one-entry file was).
    return {"id", "name"} <= entries[0].keys()


def parse(path: Path, data: Any, limits: Limits, **_: Any) -> list[Service]:
    entries = data.get("services") if isinstance(data, dict) and "services" in data else data
    if not isinstance(entries, list):
        raise InputError(str(path), f"expected a JSON array of services, got {json_type(entries)}", hint=FORMAT_HINT)
    if not entries:
        raise InputError(str(path), "contains no services", hint=FORMAT_HINT)
    services = []
    for index, item in enumerate(entries):
        reader = EntryReader(path, index, item, limits)
        service_id = reader.text("id")
        reader.entry = f"{index} (id {service_id!r})"
        services.append(reader.service(
            id=service_id,
            type=reader.text("type", required=False, default="generic"),
            name=reader.text("name"),
            description=reader.text("description"),
            metadata=reader.mapping("metadata"),
        ))
    return services
