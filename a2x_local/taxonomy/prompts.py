"""Prompts are data: one file per call type under `prompts/`, loaded by name, hashed into every build record.

A file holds the system message, a line `<<<USER>>>`, then the user message. The system part is the same for
every request of a call type (shared instructions first, so an engine's prefix cache serves it once); the user
part puts the node's context before the items, so requests about the same node share that too.
Placeholders are `$name` (string.Template), so JSON braces and service text never need escaping.
"""

from __future__ import annotations

import hashlib
from functools import cache, lru_cache
from importlib import resources
from string import Template

from a2x_local.llm.types import Message

_SEPARATOR = "<<<USER>>>"
_FRAGMENTS = ("design_rules",)
CALL_TYPES = ("keywords", "design_descriptions", "design_keywords", "validate_root", "redesign_root", "assign",
              "refine", "crossdomain_pick", "crossdomain_place")


def _files() -> dict[str, str]:
    folder = resources.files("a2x_local.taxonomy") / "prompts"
    return {entry.name: entry.read_text(encoding="utf-8") for entry in folder.iterdir()
            if entry.name.endswith(".md")}


@lru_cache(maxsize=1)
def prompt_files() -> dict[str, str]:
    """Every prompt file's text by file name (read once per process)."""
    files = _files()
    missing = [name for name in (*CALL_TYPES, *_FRAGMENTS) if f"{name}.md" not in files]
    if missing:
        raise RuntimeError(f"prompt files missing from the package: {missing}")
    return files


def prompt_hash() -> str:
    """SHA-256 over all prompt files (names and texts): a changed prompt is a different build setting."""
    digest = hashlib.sha256()
    for name, text in sorted(prompt_files().items()):
        digest.update(name.encode())
        digest.update(b"\x00")
        digest.update(text.encode())
        digest.update(b"\x00")
    return digest.hexdigest()


@cache
def _templates(call_type: str) -> tuple[Template, Template]:
    text = prompt_files()[f"{call_type}.md"]
    if _SEPARATOR not in text:
        raise RuntimeError(f"prompt {call_type}.md lacks the {_SEPARATOR} line")
    system, user = text.split(_SEPARATOR, 1)
    return Template(system.strip()), Template(user.strip())


def render(call_type: str, *, system: dict[str, object] | None = None, **user: object) -> list[Message]:
    """Chat messages for one request; ``system`` fills build-wide placeholders, ``user`` the per-request ones."""
    system_template, user_template = _templates(call_type)
    # Fragments go in as values, so their own text is never parsed as a template.
    values = {name: prompt_files()[f"{name}.md"].strip() for name in _FRAGMENTS}
    values.update({k: str(v) for k, v in (system or {}).items()})
    return [
        {"role": "system", "content": system_template.substitute(values)},
        {"role": "user", "content": user_template.substitute({k: str(v) for k, v in user.items()})},
    ]
