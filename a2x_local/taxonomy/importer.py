"""`tree import`: a taxonomy made elsewhere (hand-curated, or exported by another build) as a searchable tree.

Accepted JSON (documented in the README, "Imported trees"):
- nested: ``{"format": "a2x-tree", "version": 1, "root": NODE}`` or a bare NODE (what `tree export` and
  ``Tree.to_nested()`` write), where NODE = ``{"name", "description", "boundary"?, "decision_rule"?, "keywords"?,
  "services"?: [service id, ...], "children"?: [NODE, ...], "id"?}``;
- flat: ``{"format": "a2x-tree", "version": 1, "nodes": [{"id", "parent": id | null, "name", ...}, ...]}``;
- the published A2X implementation's folder (``taxonomy.json`` + ``class.json``, see ``official.py``), given as the
  folder or its ``taxonomy.json``, converted to the nested form on reading.
A node may appear only once: a repeated ``id`` (or the same object reached twice) would give it two parents or
make a cycle, and a flat file whose parent links loop never reaches the root; both are errors, as are unknown
service ids (unless ``allow_missing``: then they are dropped and counted). Node ids of the stored tree come from
code (``root/1/2``), as for built trees.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from a2x_local.errors import InputError, cut
from a2x_local.jsonfiles import JsonLimits, read_json
from a2x_local.taxonomy import store
from a2x_local.taxonomy.export import FORMAT_NAME, FORMAT_VERSION
from a2x_local.taxonomy.official import CLASS_FILE, TAXONOMY_FILE, from_official, is_official
from a2x_local.taxonomy.types import ROOT_ID, Tree, TreeNode, child_id

MAX_DEPTH = 32
MAX_NODES = 200_000
_TEXT_LIMITS = {"name": 300, "description": 4000, "boundary": 4000, "decision_rule": 4000}
_NODE_FIELDS = {"id", "name", "description", "boundary", "decision_rule", "keywords", "services", "children"}
TREE_HINT = ("fix the tree file; docs/build.md (Imported trees) describes the format, and `a2x-local tree export`"
             " writes one to compare with")


def read_tree_file(path: Path, limits: JsonLimits | None = None) -> Any:
    """The parsed tree of an import path (a clear error for a missing or malformed file, or one over ``limits``:
    default, the packaged `[registry]` limits; a tree may nest as deep as its MAX_DEPTH levels need).

    A folder, or a ``taxonomy.json`` of the published implementation, is read with the ``class.json`` beside it
    and converted to the nested exchange form, its warnings carried along under ``"warnings"``.
    """
    path = Path(path)
    if path.is_dir():
        path = path / TAXONOMY_FILE
    # Each tree level nests two JSON levels (a node, its children's list), below a wrapper and a node's lists.
    limits = (limits or JsonLimits.defaults()).allowing_depth(2 * MAX_DEPTH + 4)
    data = read_json(path, limits)
    if not is_official(data):
        return data
    class_path = path.parent / CLASS_FILE
    if not class_path.is_file():
        raise InputError(str(path), f"a tree of the A2X-registry format needs its {CLASS_FILE} beside it"
                         f" ({class_path} not found): it holds the categories' names and descriptions",
                         hint=TREE_HINT)
    root, warnings = from_official(data, read_json(class_path, limits), source=str(path), class_source=str(class_path),
                                   max_depth=MAX_DEPTH, max_nodes=MAX_NODES)
    return {"format": FORMAT_NAME, "version": FORMAT_VERSION, "root": root, "imported_from": "a2x-registry",
            "warnings": warnings}


def import_tree(data: Any, known_services: Iterable[str], *, source: str = "<tree>",
                allow_missing: bool = False) -> tuple[Tree, list[str]]:
    """Validate and convert; return the tree and warnings (e.g. registry services the tree does not place).

    Service ids the registry lacks are an error naming them, or with ``allow_missing`` are dropped (and counted in
    the warnings).
    """
    known = set(known_services)
    if is_official(data):
        raise InputError(source, f"a {TAXONOMY_FILE} of the A2X-registry format: import its folder (or the file)"
                         f" by path, so its {CLASS_FILE} is read too", hint="a2x-local tree import FOLDER")
    carried = list(data.get("warnings", [])) if isinstance(data, dict) and "imported_from" in data else []
    if isinstance(data, dict) and "nodes" in data and "root" not in data:
        _check_header(data, source)
        root = _from_flat(data["nodes"], source)
    elif isinstance(data, dict) and "root" in data:
        _check_header(data, source)
        root = data["root"]
    elif isinstance(data, dict):
        root = data
    else:
        raise InputError(source, f"expected a JSON object, got {type(data).__name__}", hint=TREE_HINT)
    tree = _from_nested(root, source)
    unknown: dict[str, str] = {}
    for node in tree.walk():
        for service_id in node.services:
            if service_id not in known and service_id not in unknown:
                unknown[service_id] = node.name
    warnings = carried
    if unknown and allow_missing:
        for node in tree.walk():
            node.services = [s for s in node.services if s in known]
        tree = Tree(nodes=tree.nodes, root_id=tree.root_id)   # fresh caches of subtree services
        warnings.append(f"{len(unknown)} service ids of the tree are not in the registry and were dropped"
                        f" (e.g. '{next(iter(unknown))}')")
    elif unknown:
        shown = ", ".join(f"'{s}' (in '{n}')" for s, n in list(unknown.items())[:5])
        more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
        raise InputError(source, f"{len(unknown)} unknown service id(s): {shown}{more}",
                         hint="import into the registry that holds these services, or fix the ids; --allow-missing"
                         " drops them instead")
    unplaced = len(known - tree.service_ids())
    if unplaced:
        warnings.append(f"{unplaced} of {len(known)} registry services are not in the imported tree;"
                        " searches cannot find them")
    return tree, warnings


def _check_header(data: dict, source: str) -> None:
    if data.get("format", FORMAT_NAME) != FORMAT_NAME:
        raise InputError(source, f"format is {data.get('format')!r}, expected {FORMAT_NAME!r}", field="format",
                         hint=TREE_HINT)
    if data.get("version", FORMAT_VERSION) != FORMAT_VERSION:
        raise InputError(source, f"version {data.get('version')!r} is not supported (expected {FORMAT_VERSION})",
                         field="version", hint=TREE_HINT)


def _from_flat(nodes: Any, source: str) -> dict[str, Any]:
    """Nested form of a flat node list; parent links that loop or dangle are errors."""
    if not isinstance(nodes, list) or not nodes:
        raise InputError(source, "'nodes' must be a non-empty list", field="nodes", hint=TREE_HINT)
    if len(nodes) > MAX_NODES:
        raise InputError(source, f"more than {MAX_NODES} nodes", field="nodes", hint=TREE_HINT)
    by_id: dict[str, dict[str, Any]] = {}
    for index, node in enumerate(nodes):
        if not isinstance(node, dict):
            raise InputError(source, "a node must be a JSON object", entry=index, hint=TREE_HINT)
        node_id = node.get("id")
        if not isinstance(node_id, str) or not node_id:
            raise InputError(source, "every node of a flat list needs a non-empty string 'id'", entry=index,
                             field="id", hint=TREE_HINT)
        if node_id in by_id:
            raise InputError(source, f"node id '{node_id}' appears twice", entry=index, field="id", hint=TREE_HINT)
        by_id[node_id] = node
    roots = [n for n in nodes if n.get("parent") is None]
    if len(roots) != 1:
        raise InputError(source, f"expected exactly one node without a parent (the root), found {len(roots)}",
                         field="parent", hint=TREE_HINT)
    nested = {n["id"]: {k: v for k, v in n.items() if k != "parent"} | {"children": []} for n in nodes}
    for node in nodes:
        if node.get("parent") in nested:
            nested[node["parent"]]["children"].append(nested[node["id"]])
    # One walk from the root (preorder, children in file order). Every node has one parent, so the walk meets each
    # node it reaches once; a node it does not reach has a parent that dangles or is on a loop.
    root = nested[roots[0]["id"]]
    reached = {root["id"]}
    too_deep: str | None = None
    stack = [(root, 0)]
    while stack:
        data, depth = stack.pop()
        if depth > MAX_DEPTH and too_deep is None:
            too_deep = data["id"]
        reached.update(child["id"] for child in data["children"])
        stack.extend((child, depth + 1) for child in reversed(data["children"]))
    if len(reached) < len(nodes):
        _raise_unreached(next(n for n in nodes if n["id"] not in reached), by_id, source)
    for node in nodes:
        if node.get("children"):
            raise InputError(source, "flat nodes name their parent; 'children' is not allowed", entry=node["id"],
                             field="children", hint=TREE_HINT)
    if too_deep is not None:
        names = []
        current = by_id[too_deep]
        while current.get("parent") is not None:
            names.append(current.get("name", "?"))
            current = by_id[current["parent"]]
        raise InputError(source, f"the tree is deeper than {MAX_DEPTH} levels",
                         entry=" > ".join(["root", *map(str, reversed(names))]), hint=TREE_HINT)
    return root


def _raise_unreached(node: dict[str, Any], by_id: dict[str, dict[str, Any]], source: str) -> None:
    """The error for a node the root does not reach: its ancestors end at a missing parent or loop."""
    seen = [node["id"]]
    on_path = {node["id"]}
    current = node
    while True:
        parent = current["parent"]          # not None: only the root has none, and the root is reached
        if parent not in by_id:
            raise InputError(source, f"parent '{parent}' of node '{current['id']}' does not exist",
                             entry=current["id"], field="parent", hint=TREE_HINT)
        if parent in on_path:
            loop = " -> ".join([*seen[seen.index(parent):], parent])
            raise InputError(source, f"cycle in parent links: {loop}", entry=node["id"], field="parent", hint=TREE_HINT)
        seen.append(parent)
        on_path.add(parent)
        current = by_id[parent]


def _from_nested(root: Any, source: str) -> Tree:
    nodes: dict[str, TreeNode] = {}
    seen_objects: set[int] = set()
    seen_ids: dict[str, str] = {}
    stack: list[tuple[Any, str, str | None, int, str]] = [(root, ROOT_ID, None, 0, "root")]
    while stack:
        data, node_id, parent, depth, where = stack.pop()
        if not isinstance(data, dict):
            raise InputError(source, f"a node must be a JSON object, got {type(data).__name__}", entry=where,
                             hint=TREE_HINT)
        if id(data) in seen_objects:
            raise InputError(source, "the same node object appears twice (a cycle or a shared subtree)",
                             entry=where, hint=TREE_HINT)
        seen_objects.add(id(data))
        explicit = data.get("id")
        if explicit is not None:
            if not isinstance(explicit, str | int):
                raise InputError(source, "'id' must be a string", entry=where, field="id", hint=TREE_HINT)
            if str(explicit) in seen_ids:
                raise InputError(source, f"node id '{explicit}' appears twice (first at {seen_ids[str(explicit)]});"
                                 " a node may have one parent only, and a repeated id would make a cycle",
                                 entry=where, field="id", hint=TREE_HINT)
            seen_ids[str(explicit)] = where
        if depth > MAX_DEPTH:
            raise InputError(source, f"the tree is deeper than {MAX_DEPTH} levels", entry=where, hint=TREE_HINT)
        if len(nodes) >= MAX_NODES:
            raise InputError(source, f"more than {MAX_NODES} nodes", hint=TREE_HINT)
        node = _node(data, node_id, parent, depth, where, source)
        nodes[node_id] = node
        if parent is not None:
            nodes[parent].children.append(node_id)
        children = data.get("children", [])
        if not isinstance(children, list):
            raise InputError(source, "'children' must be a list", entry=where, field="children", hint=TREE_HINT)
        for position, child in reversed(list(enumerate(children, start=1))):
            label = child.get("name", "?") if isinstance(child, dict) else "?"
            stack.append((child, child_id(node_id, position), node_id, depth + 1, f"{where} > {label}"))
    return Tree(nodes=nodes, root_id=ROOT_ID)


def _node(data: dict, node_id: str, parent: str | None, depth: int, where: str, source: str) -> TreeNode:
    unknown = sorted(set(data) - _NODE_FIELDS - {"parent"})
    if unknown:
        shown = [cut(name, 60) for name in unknown[:5]] + ([f"{len(unknown) - 5} more"] if len(unknown) > 5 else [])
        raise InputError(source, f"unknown field(s) {shown}; a node has {sorted(_NODE_FIELDS)}", entry=where,
                         hint=TREE_HINT)
    texts = {}
    for key, limit in _TEXT_LIMITS.items():
        value = data.get(key, "" if key in ("boundary", "decision_rule") else None)
        if value is None:
            raise InputError(source, f"missing '{key}'", entry=where, field=key, hint=TREE_HINT)
        if not isinstance(value, str):
            raise InputError(source, f"'{key}' must be a string", entry=where, field=key, hint=TREE_HINT)
        if len(value) > limit:
            raise InputError(source, f"'{key}' is longer than {limit} characters", entry=where, field=key,
                             hint=TREE_HINT)
        texts[key] = value.strip()
    if not texts["name"]:
        raise InputError(source, "'name' must not be empty", entry=where, field="name", hint=TREE_HINT)
    services = data.get("services", [])
    if not isinstance(services, list) or not all(isinstance(s, str) for s in services):
        raise InputError(source, "'services' must be a list of service id strings", entry=where, field="services",
                         hint=TREE_HINT)
    keywords = data.get("keywords", [])
    if not isinstance(keywords, list) or not all(isinstance(k, str) for k in keywords):
        raise InputError(source, "'keywords' must be a list of strings", entry=where, field="keywords", hint=TREE_HINT)
    return TreeNode(node_id, parent, depth, texts["name"], texts["description"], texts["boundary"],
                    texts["decision_rule"], list(keywords), services=list(dict.fromkeys(services)))


def save_import(con: Any, tree: Tree, *, fingerprint: str, source: str, activate: bool,
                warnings: list[str]) -> int:
    """Store an imported tree as a completed build of kind 'import' (all or nothing) and return its id."""
    return store.save_completed(con, tree, kind="import", fingerprint=fingerprint, stats={"warnings": warnings},
                                make_active=activate, source=source)
