"""The LLM search prompts (one file per call type, one per mode) through the shared `PromptBook`.

The system part depends only on the call type, the mode and the answer form; the user part puts the node's list
before the query, so every query at the same node shares that prefix in an engine's cache.
"""

from __future__ import annotations

from a2x_local.prompts import PromptBook
from a2x_local.search.llm.config import MODES

CALL_TYPES = ("descend", "select", "full")

PROMPTS = PromptBook("a2x_local.search.llm", call_types=CALL_TYPES,
                     fragments=tuple(f"mode_{mode}" for mode in MODES))


def prompt_hash() -> str:
    """SHA-256 over the search prompts: recorded with evaluation runs, so a changed prompt is a changed method."""
    return PROMPTS.hash()


def render(call_type: str, mode: str, *, answer: str = "", **user: object) -> list[dict[str, str]]:
    """Chat messages for one request: system from (call type, mode, answer form), user from ``user``."""
    return PROMPTS.render(call_type, system={"intent": PROMPTS.fragment(f"mode_{mode}"), "answer": answer}, **user)
