"""The build's prompts (one file per call type under `prompts/`), loaded by the shared `PromptBook`.

The user part of each prompt puts the node's context before the items, so requests about the same node share that
prefix too; `design_rules` is a fragment inserted into every design prompt's system message, and `context_root` /
`context_node` say which category a keyword, design or refine request is about (below the root: its description,
its boundary and the instruction to tell services apart within that domain).
"""

from __future__ import annotations

from a2x_local.prompts import PromptBook

CALL_TYPES = ("keywords", "design_descriptions", "design_keywords", "validate_root", "redesign_root", "assign",
              "assign_one", "assign_new", "refine", "crossdomain_pick", "crossdomain_place")

PROMPTS = PromptBook("a2x_local.taxonomy", call_types=CALL_TYPES,
                     fragments=("design_rules", "context_root", "context_node"))


def prompt_hash() -> str:
    """SHA-256 over all build prompt files: recorded with every build, so a changed prompt is a changed setting."""
    return PROMPTS.hash()


def render(call_type: str, *, system: dict[str, object] | None = None, **user: object) -> list[dict[str, str]]:
    """Chat messages for one build request; ``system`` fills build-wide placeholders, ``user`` per-request ones."""
    return PROMPTS.render(call_type, system=system, **user)


def node_context(*, is_root: bool, count: int, path: str = "", description: str = "", boundary: str = "") -> str:
    """The user-part lines that name the category being split (filled from `context_root` / `context_node`)."""
    if is_root:
        return PROMPTS.fill("context_root", count=count)
    return PROMPTS.fill("context_node", path=path, count=count, description=description or "(none given)",
                        boundary=boundary or "(none given)")
