"""Benchmark query files: ``[{id, query, correct_tools: [{id}, ...]}, ...]`` as JSON, or one object per line (JSONL).

A query may also give its reference decomposition, ``steps: [{task, correct_tools: [{id}, ...]}, ...]``; runs of
a method that decomposes (compose) are then scored on step count and per-step retrieval too.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from a2x_local.errors import InputError
from a2x_local.jsonfiles import JsonLimits, json_lines, read_json_file, read_text


@dataclass(frozen=True)
class Query:
    """One benchmark query and the ids of the services that answer it."""

    id: str
    query: str
    correct: tuple[str, ...]
    steps: tuple[tuple[str, ...], ...] | None = None   # reference steps: each one's correct service ids


QUERIES_HINT = ('write a JSON list of {"id", "query", "correct_tools": [{"id"}]} objects, or one object per line'
                " (JSONL); docs/evaluation.md (Query files) shows one")
QUERY_HINT = 'a query is {"id": "q1", "query": "what the agent needs", "correct_tools": [{"id": "a_service_id"}]}'
STEPS_EXAMPLE = 'for example: "steps": [{"task": "check seats", "correct_tools": [{"id": "t1"}]}]'
TEXTS_HINT = 'write one query per line (.txt), or a JSON list of strings or of {"query": "..."} objects'


def _entries(path: Path, limits: JsonLimits | None) -> list[tuple[str, Any]]:
    """The query entries: a JSON list, JSON Lines, or a one-line JSON object (JSON Lines of one query)."""
    found = read_json_file(path, what="query", hint=QUERIES_HINT, limits=limits)
    if found.lines is not None or isinstance(found.value, list):
        return found.entries()
    if isinstance(found.value, dict) and "\n" not in found.text.strip():
        return json_lines(found.text, str(path), limits)
    raise InputError(str(path), f"expected a JSON list of queries, found {type(found.value).__name__}",
                     hint="wrap the queries in [...], or write one query object per line (JSONL)")


def _tool_id(path: Path, where: str, index: int, tool: Any, prefix: str = "") -> str:
    field = f"{prefix}correct_tools[{index}]"
    if isinstance(tool, dict):
        tool = tool.get("id")
        field += ".id"
    if isinstance(tool, int) and not isinstance(tool, bool):
        tool = str(tool)
    if not isinstance(tool, str) or not tool.strip():
        raise InputError(str(path), "each correct tool needs a non-empty string id", entry=where, field=field,
                         hint=QUERY_HINT)
    return tool


def parse_query(path: Path, position: str, entry: Any) -> Query:
    """One entry as a Query; ``position`` (list index or "line N") names it in errors, with its id once known."""
    where = position
    if not isinstance(entry, dict):
        raise InputError(str(path), f"expected an object, found {type(entry).__name__}", entry=where, hint=QUERY_HINT)
    raw_id = entry.get("id")
    if isinstance(raw_id, int) and not isinstance(raw_id, bool):
        raw_id = str(raw_id)
    if not isinstance(raw_id, str) or not raw_id.strip():
        raise InputError(str(path), "missing or empty query id", entry=where, field="id", hint=QUERY_HINT)
    where = f"{position} (id {raw_id!r})"
    text = entry.get("query")
    if not isinstance(text, str) or not text.strip():
        raise InputError(str(path), "missing or empty query text", entry=where, field="query", hint=QUERY_HINT)
    tools = entry.get("correct_tools")
    if not isinstance(tools, list) or not tools:
        raise InputError(str(path), "expected a non-empty list of correct tools", entry=where,
                         field="correct_tools", hint='for example: "correct_tools": [{"id": "weather_tool_1"}]')
    correct = tuple(dict.fromkeys(_tool_id(path, where, i, tool) for i, tool in enumerate(tools)))
    return Query(raw_id, text.strip(), correct, _reference_steps(path, where, entry.get("steps")))


def _reference_steps(path: Path, where: str, steps: Any) -> tuple[tuple[str, ...], ...] | None:
    """The reference decomposition: one tuple of correct ids per step (empty when a step names none)."""
    if steps is None:
        return None
    if not isinstance(steps, list) or not steps:
        raise InputError(str(path), "expected a non-empty list of steps", entry=where, field="steps",
                         hint=STEPS_EXAMPLE)
    found = []
    for index, step in enumerate(steps):
        if isinstance(step, str):
            found.append(())
            continue
        if not isinstance(step, dict):
            raise InputError(str(path), "a step is a string or an object", entry=where, field=f"steps[{index}]",
                             hint=STEPS_EXAMPLE)
        tools = step.get("correct_tools", [])
        if not isinstance(tools, list):
            raise InputError(str(path), "expected a list of correct tools", entry=where,
                             field=f"steps[{index}].correct_tools", hint=QUERY_HINT)
        found.append(tuple(dict.fromkeys(_tool_id(path, where, i, tool, f"steps[{index}].")
                                         for i, tool in enumerate(tools))))
    return tuple(found)


def load_queries(path: Path | str, limits: JsonLimits | None = None) -> list[Query]:
    """Every query of a file, checked; a bad entry raises an InputError naming the entry and the field. A file over
    ``limits`` (default: the packaged `[registry]` limits) is refused."""
    path = Path(path)
    entries = _entries(path, limits)
    if not isinstance(entries, list) or not entries:
        raise InputError(str(path), "the file holds no queries", hint=QUERIES_HINT)
    queries, seen = [], {}
    for position, entry in entries:
        query = parse_query(path, position, entry)
        if query.id in seen:
            raise InputError(str(path), f"duplicate query id (first at {seen[query.id]})",
                             entry=f"{position} (id {query.id!r})", field="id", hint="give every query its own id")
        seen[query.id] = position
        queries.append(query)
    return queries


def load_query_texts(path: Path | str, limits: JsonLimits | None = None) -> list[str]:
    """Queries to search (not to score): a text file with one query per line, or JSON/JSONL whose entries are
    strings or objects with a ``query`` field (a benchmark file works as it is)."""
    path = Path(path)
    if path.suffix.lower() in {".txt", ".text", ""}:
        lines = [line.strip() for line in read_text(path, limits, what="query", empty_ok=True).splitlines()]
        texts = [line for line in lines if line]
        if not texts:
            raise InputError(str(path), "the file holds no queries", hint=TEXTS_HINT)
        return texts
    texts = []
    for position, entry in _entries(path, limits):
        if isinstance(entry, dict):
            entry = entry.get("query")
        if not isinstance(entry, str) or not entry.strip():
            raise InputError(str(path), "expected a non-empty query string", entry=position, field="query",
                             hint=TEXTS_HINT)
        texts.append(entry.strip())
    if not texts:
        raise InputError(str(path), "the file holds no queries", hint=TEXTS_HINT)
    return texts
