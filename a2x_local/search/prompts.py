"""Prompts of the LLM search methods are data: one file per call type under `prompts/`, plus one per mode.

A call-type file holds the system message, a line `<<<USER>>>`, then the user message. The system part depends only
on the call type and the mode (shared instructions first, so an engine's prefix cache serves it once); the user
part puts the node's list before the query, so every query at the same node shares that prefix too.
Placeholders are `$name` (string.Template): service text never needs escaping.
"""

from __future__ import annotations

import hashlib
from functools import cache, lru_cache
from importlib import resources
from string import Template

from a2x_local.llm.types import Message
from a2x_local.search.llm_config import MODES

_SEPARATOR = "<<<USER>>>"
CALL_TYPES = ("descend", "select", "full")


@lru_cache(maxsize=1)
def prompt_files() -> dict[str, str]:
    """Every prompt file's text by name (read once per process)."""
    folder = resources.files("a2x_local.search") / "prompts"
    files = {entry.name[:-3]: entry.read_text(encoding="utf-8") for entry in folder.iterdir()
             if entry.name.endswith(".md")}
    missing = [name for name in (*CALL_TYPES, *(f"mode_{mode}" for mode in MODES)) if name not in files]
    if missing:
        raise RuntimeError(f"search prompt files missing from the package: {missing}")
    return files


def prompt_hash() -> str:
    """SHA-256 over the search prompts: recorded with evaluation runs, so a changed prompt is a changed method."""
    digest = hashlib.sha256()
    for name, text in sorted(prompt_files().items()):
        digest.update(f"{name}\x00{text}\x00".encode())
    return digest.hexdigest()


@cache
def _system(call_type: str, mode: str, answer: str) -> str:
    system, _ = _split(call_type)
    intent = prompt_files()[f"mode_{mode}"].strip()
    return Template(system).substitute(intent=intent, answer=answer)


@cache
def _split(call_type: str) -> tuple[str, Template]:
    text = prompt_files()[call_type]
    if _SEPARATOR not in text:
        raise RuntimeError(f"search prompt {call_type}.md lacks the {_SEPARATOR} line")
    system, user = text.split(_SEPARATOR, 1)
    return system.strip(), Template(user.strip())


def render(call_type: str, mode: str, *, answer: str = "", **user: object) -> list[Message]:
    """Chat messages for one request: system from (call type, mode, answer form), user from ``user``."""
    _, user_template = _split(call_type)
    return [
        {"role": "system", "content": _system(call_type, mode, answer)},
        {"role": "user", "content": user_template.substitute({k: str(v) for k, v in user.items()})},
    ]
