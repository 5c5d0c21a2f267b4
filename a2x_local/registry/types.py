"""Plain data types of the registry stage; these are what other stages receive."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from a2x_local.registry.schemas import parameters_schema

SERVICE_TYPES: tuple[str, ...] = ("generic", "mcp_server", "mcp_tool", "a2a", "skill")


def content_hash(name: str, description: str) -> str:
    """Hash of what a model reads about a service; a tree is current while these hashes are unchanged."""
    return hashlib.sha256(f"{name}\x00{description}".encode()).hexdigest()


def canonical_json(value: Any) -> str:
    """Stable JSON text (sorted keys, no spaces) so equal metadata compares equal."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True)
class Service:
    """One agent-callable service: an MCP server or tool, an A2A agent, a skill, or a generic API."""

    id: str
    type: str
    name: str
    description: str
    metadata: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    source: str | None = field(default=None, compare=False)

    @property
    def content_hash(self) -> str:
        return content_hash(self.name, self.description)

    @property
    def text(self) -> str:
        """The `name: description` line shown to models and embedded by retrievers."""
        return f"{self.name}: {self.description}"

    @cached_property
    def parameters_schema(self) -> dict[str, Any] | None:
        """Its parameters as one JSON Schema object, whatever shape the format gave them (None: it has none);
        the metadata keeps the original (`schemas.parameters_schema`)."""
        return parameters_schema(self.metadata)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": self.type,
            "name": self.name,
            "description": self.description,
            "metadata": self.metadata,
            "source": self.source,
            "parameters_schema": self.parameters_schema,
        }
