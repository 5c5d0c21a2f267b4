"""Trees written by the published A2X implementation (the A2X-registry project), read into our nested format.

That implementation stores a tree as two files in one folder:
- ``taxonomy.json``: ``{"version": "2.0-hierarchical", "root": ID, "categories": {ID: {"children": [ID, ...],
  "services": [service id, ...]}}, "build_status": ...}``;
- ``class.json``: ``{"version": ..., "categories": {ID: {"name", "description", "boundary"?, "decision_rule"?}}}``.
Its builds can list one category under two parents (its publicMCP tree has ``cat_sub22_sub8`` under ``cat_sub22``
and ``cat_sub4_sub22``): its search then reaches that category, and everything under it, from either parent. Such a
category is imported under each of its parents (a copy of its subtree under each), which is what that search sees,
and a warning says so; a loop (a category under itself) is an error naming it. Its children are listed in string
order of their ids (``cat_sub1, cat_sub10, cat_sub2``); they are put back in the order the build created them
(natural order of the ids), which is also the order a reader expects.
"""

from __future__ import annotations

import re
from typing import Any

from a2x_local.errors import InputError

TAXONOMY_FILE = "taxonomy.json"
CLASS_FILE = "class.json"
_DIGITS = re.compile(r"(\d+)")
OFFICIAL_HINT = ("fix the file; docs/build.md (Trees of the published A2X implementation) says what a2x-local reads"
                 f" from {TAXONOMY_FILE} and {CLASS_FILE}")


def is_official(data: Any) -> bool:
    """A parsed ``taxonomy.json`` of the published implementation (a root id and a dict of categories)."""
    return (isinstance(data, dict) and isinstance(data.get("categories"), dict) and isinstance(data.get("root"), str)
            and "format" not in data)


def _natural(category_id: str) -> list[Any]:
    return [int(part) if part.isdigit() else part for part in _DIGITS.split(category_id)]


def _ids(value: Any, source: str, entry: str, field: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise InputError(source, f"'{field}' must be a list of id strings", entry=entry, field=field,
                         hint=OFFICIAL_HINT)
    return list(value)


def from_official(taxonomy: dict[str, Any], classes: Any, *, source: str, class_source: str,
                  max_depth: int = 32, max_nodes: int = 200_000) -> tuple[dict[str, Any], list[str]]:
    """The nested tree (our exchange format's root node) and warnings about what was left out or assumed."""
    categories = taxonomy["categories"]
    texts = classes.get("categories") if isinstance(classes, dict) else None
    if not isinstance(texts, dict):
        raise InputError(class_source, "expected an object with a 'categories' object (id -> name, description)",
                         field="categories", hint=OFFICIAL_HINT)
    root_id = taxonomy["root"]
    if root_id not in categories:
        raise InputError(source, f"the root '{root_id}' is not among the categories", field="root", hint=OFFICIAL_HINT)
    warnings: list[str] = []
    status = taxonomy.get("build_status")
    if status is not None and status != "complete":
        warnings.append(f"the tree's build_status is {status!r}, not 'complete': it may be unfinished")
    unnamed: dict[str, None] = {}
    parents: dict[str, list[str]] = {}
    placements: dict[str, int] = {}
    built = 0

    def expand(category_id: str, path: tuple[str, ...]) -> dict[str, Any]:
        """A fresh nested node for the category and its whole subtree (a category with two parents is expanded
        once under each)."""
        nonlocal built
        data = categories[category_id]
        if not isinstance(data, dict):
            raise InputError(source, "a category must be an object", entry=category_id, hint=OFFICIAL_HINT)
        if len(path) > max_depth + 1:
            raise InputError(source, f"the tree is deeper than {max_depth} levels", entry=category_id,
                             hint=OFFICIAL_HINT)
        built += 1
        if built > max_nodes:
            raise InputError(source, f"more than {max_nodes} nodes once every category with several parents is"
                             " placed under each of them", entry=category_id, hint=OFFICIAL_HINT)
        node = _node(category_id, texts.get(category_id), _ids(data.get("services"), source, category_id,
                                                                "services"), class_source, unnamed)
        placements[category_id] = placements.get(category_id, 0) + 1
        if placements[category_id] > 1:       # a further placement: ids of nested nodes must stay unique
            node["id"] = f"{category_id} (placement {placements[category_id]})"
        for child in sorted(_ids(data.get("children"), source, category_id, "children"), key=_natural):
            if child not in categories:
                raise InputError(source, f"child '{child}' is not among the categories", entry=category_id,
                                 field="children", hint=OFFICIAL_HINT)
            if child in path:
                raise InputError(source, f"category '{child}' is listed under '{category_id}', which lies under it"
                                 f" (the parent links loop: {' > '.join((*path[path.index(child):], child))})",
                                 entry=category_id, field="children", hint=OFFICIAL_HINT)
            if category_id not in parents.setdefault(child, []):
                parents[child].append(category_id)
            node["children"].append(expand(child, (*path, child)))
        return node

    root = expand(root_id, (root_id,))
    shared = {child: under for child, under in parents.items() if len(under) > 1}
    if shared:
        first, under = next(iter(shared.items()))
        warnings.append(f"{len(shared)} categories are listed under several parents (e.g. '{first}' under"
                        f" {' and '.join(repr(p) for p in under)}): each is imported under every parent, as the"
                        " published search reaches it from each")
    unreached = len(categories) - len(parents) - 1
    if unreached:
        warnings.append(f"{unreached} categories are not reachable from the root '{root_id}' and were left out")
    if unnamed:
        warnings.append(f"{len(unnamed)} categories have no entry in {CLASS_FILE} and are named by their id,"
                        f" e.g. '{next(iter(unnamed))}'")
    return root, warnings


def _node(category_id: str, text: Any, services: list[str], class_source: str,
          unnamed: dict[str, None]) -> dict[str, Any]:
    node: dict[str, Any] = {"id": category_id, "services": services, "children": []}
    if text is None:
        unnamed[category_id] = None
        return node | {"name": category_id, "description": ""}
    if not isinstance(text, dict):
        raise InputError(class_source, "a category's entry must be an object", entry=category_id, hint=OFFICIAL_HINT)
    for key in ("name", "description", "boundary", "decision_rule"):
        value = text.get(key)
        if value is None:
            continue
        if not isinstance(value, str):
            raise InputError(class_source, f"'{key}' must be a string", entry=category_id, field=key,
                             hint=OFFICIAL_HINT)
        node[key] = value
    node.setdefault("name", category_id)
    node.setdefault("description", "")
    return node
