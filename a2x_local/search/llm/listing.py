"""How categories and services are written into prompts: short single lines, numbered in stored order."""

from __future__ import annotations

from collections.abc import Sequence

from a2x_local.llm import as_data
from a2x_local.registry import Service
from a2x_local.search.llm.config import LlmSearchConfig
from a2x_local.taxonomy import TreeNode


def clip(text: str, limit: int) -> str:
    """One line of at most ``limit`` characters (0 = no limit); newlines would break a numbered list."""
    text = " ".join(text.split())
    if limit <= 0 or len(text) <= limit:
        return text
    return text[: max(1, limit - 1)].rstrip() + "…"


def service_line(service: Service, config: LlmSearchConfig) -> str:
    """`name: description`, the description cut to the configured length; service text is data (`as_data`)."""
    description = clip(as_data(service.description), config.service_description_chars)
    name = clip(as_data(service.name), config.name_chars)
    return f"{name}: {description}" if description else name


def category_line(node: TreeNode, config: LlmSearchConfig, *, boundary: bool) -> str:
    """`name: description`, plus the boundary when the mode needs the sharpest distinctions.

    Built boundaries read "NOT here: …"; an imported one may be worded otherwise ("Includes …; excludes …"), so
    only text that already says what it is shown as is, and other text is labelled as a boundary.
    """
    line = f"{clip(node.name, config.name_chars)}: {clip(node.description, config.category_description_chars)}"
    if boundary and node.boundary and config.boundary_chars:
        text = clip(node.boundary, config.boundary_chars)
        line += f" ({text})" if text.lower().startswith("not here") else f" (boundary: {text})"
    return line


def numbered(lines: Sequence[str]) -> str:
    """Numbered from 1 in the given order (numeric order: 1, 2, … 10, never 1, 10, 2)."""
    return "\n".join(f"{k}. {line}" for k, line in enumerate(lines, start=1))
