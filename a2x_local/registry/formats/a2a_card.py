"""A2A AgentCards (protocol v0.3 and v1.0 field names): one service per agent.

The description is the card's description followed by a summary of its skills, so a model that reads only
`name: description` still sees what the agent can do; the card itself and the normalised endpoints stay in
metadata.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from a2x_local.errors import InputError
from a2x_local.registry.formats._common import FORMAT_HINT, EntryReader, Limits, json_type, slug
from a2x_local.registry.types import Service

NAME = "a2a-card"
SUMMARY = "A2A AgentCard, v0.3 or v1.0 (one card or a list of cards)"

_MARKERS = ("skills", "supportedInterfaces", "capabilities", "defaultInputModes", "preferredTransport",
            "protocolVersion", "additionalInterfaces")
_SKILL_TEXT_CHARS = 200


def _cards(data: Any) -> Any:
    return data if isinstance(data, list) else [data]


def matches(data: Any) -> bool:
    cards = _cards(data)
    first = cards[0] if isinstance(cards, list) and cards else None
    return isinstance(first, dict) and "name" in first and any(key in first for key in _MARKERS)


def _endpoints(card: dict[str, Any]) -> tuple[str, list[dict[str, str]]]:
    """(field layout "v1.0" or "v0.3", [{url, binding, protocolVersion}]) for either layout.

    Published cards mix the two (v1.0 `supportedInterfaces` next to a v0.3 `url`), so both are read and
    endpoints are de-duplicated by URL, the v1.0 entries first.
    """
    interfaces = card.get("supportedInterfaces")
    layout = "v1.0" if isinstance(interfaces, list) else "v0.3"
    endpoints = [
        {"url": str(i.get("url", "")), "binding": str(i.get("protocolBinding", i.get("transport", ""))),
         "protocolVersion": str(i.get("protocolVersion", ""))}
        for i in (interfaces if isinstance(interfaces, list) else []) if isinstance(i, dict)
    ]
    if card.get("url"):
        endpoints.append({"url": str(card["url"]), "binding": str(card.get("preferredTransport") or "JSONRPC"),
                          "protocolVersion": str(card.get("protocolVersion", ""))})
    for extra in card.get("additionalInterfaces") or []:
        if isinstance(extra, dict) and extra.get("url"):
            endpoints.append({"url": str(extra["url"]), "binding": str(extra.get("transport", "")),
                              "protocolVersion": str(card.get("protocolVersion", ""))})
    unique = {}
    for endpoint in endpoints:
        unique.setdefault(endpoint["url"], endpoint)
    return layout, list(unique.values())


def _skills(reader: EntryReader) -> list[dict[str, Any]]:
    skills = []
    for position, skill in enumerate(reader.items("skills")):
        field = f"skills[{position}]"
        if not isinstance(skill, dict):
            reader.fail(f"must be an object, got {json_type(skill)}", field)
        name = skill.get("name")
        if not isinstance(name, str) or not name.strip():
            reader.fail("is missing or not a string", f"{field}.name")
        description = skill.get("description", "")
        if not isinstance(description, str):
            reader.fail(f"must be a string, got {json_type(description)}", f"{field}.description")
        tags = skill.get("tags", [])
        skills.append({"id": str(skill.get("id", slug(name))), "name": name.strip(),
                       "description": description.strip(),
                       "tags": [str(t) for t in tags] if isinstance(tags, list) else []})
    return skills


def _summary(skills: list[dict[str, Any]]) -> str:
    parts = []
    for skill in skills:
        text = skill["description"]
        if len(text) > _SKILL_TEXT_CHARS:
            text = text[: _SKILL_TEXT_CHARS - 1].rstrip() + "…"
        parts.append(f"[{skill['name']}] {text}".strip())
    return "; ".join(parts)


def parse(path: Path, data: Any, limits: Limits, **_: Any) -> list[Service]:
    cards = _cards(data)
    if not cards:
        raise InputError(str(path), "contains no agent cards", hint=FORMAT_HINT)
    services = []
    for index, card in enumerate(cards):
        reader = EntryReader(path, index, card, limits)
        name = reader.text("name")
        reader.entry = f"{index} (agent {name!r})"
        description = reader.text("description")
        skills = _skills(reader)
        layout, endpoints = _endpoints(reader.data)
        summary = _summary(skills)
        full_description = f"{description.strip()} Skills: {summary}" if summary else description
        explicit_id = reader.text("id", required=False)
        services.append(reader.service(
            id=explicit_id or f"a2a/{slug(name)}",
            type="a2a",
            name=name,
            description=full_description,
            metadata={"card": reader.data, "card_layout": layout, "endpoints": endpoints, "skills": skills},
        ))
    return services
