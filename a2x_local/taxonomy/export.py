"""Trees out to other tools: the documented JSON exchange format (what `tree import` reads back) and Graphviz."""

from __future__ import annotations

import json
from typing import Any

from a2x_local.taxonomy.types import Tree

FORMAT_NAME = "a2x-tree"
FORMAT_VERSION = 1


def to_exchange(tree: Tree) -> dict[str, Any]:
    """{"format", "version", "build", "registry_fingerprint", "root": nested nodes} (see README, tree import)."""
    return {"format": FORMAT_NAME, "version": FORMAT_VERSION, "build": tree.build_id,
            "registry_fingerprint": tree.registry_fingerprint, "root": tree.to_nested()}


def to_json(tree: Tree) -> str:
    return json.dumps(to_exchange(tree), indent=2, ensure_ascii=False) + "\n"


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def to_dot(tree: Tree) -> str:
    """A Graphviz digraph: one box per node labelled with its name, direct services and subtree size."""
    lines = ["digraph taxonomy {", "  rankdir=LR;", "  node [shape=box, fontsize=10];"]
    for node in tree.walk():
        label = f"{node.name}\n{len(node.services)} direct / {tree.subtree_size(node.id)} in subtree"
        lines.append(f"  {_quote(node.id)} [label={_quote(label)}];")
    for node in tree.walk():
        for child in node.children:
            lines.append(f"  {_quote(node.id)} -> {_quote(child)};")
    lines.append("}")
    return "\n".join(lines) + "\n"
