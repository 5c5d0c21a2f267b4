"""Benchmark query files: ``[{id, query, correct_tools: [{id}, ...]}, ...]`` as JSON, or one object per line (JSONL).

A query may also give its reference decomposition, ``steps: [{task, correct_tools: [{id}, ...]}, ...]``; runs of
a method that decomposes (compose) are then scored on step count and per-step retrieval too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from a2x_local.errors import InputError, UserError


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


@dataclass(frozen=True)
class JsonFile:
    """A JSON or JSON Lines file as read: its text, and either its one JSON ``value`` or each line's value."""

    text: str
    value: Any = None
    lines: list[tuple[str, Any]] | None = None   # JSON Lines: ("line N", value) for each non-empty line

    def entries(self) -> list[tuple[str, Any]]:
        """Each entry with its name for errors: a line ("line N"), a list item (its index), or the one value ("0")."""
        if self.lines is not None:
            return self.lines
        if isinstance(self.value, list):
            return [(str(index), entry) for index, entry in enumerate(self.value)]
        return [("0", self.value)]


def read_json_file(path: Path, *, what: str, hint: str) -> JsonFile:
    """The file as JSON, or as JSON Lines (a .jsonl name, or JSON that fails and starts with "{"), so query, steps and
    other input files accept the same two formats and fail alike; ``what`` names the file in "not found"."""
    text = _read_text(path, what)
    if not text.strip():
        raise InputError(str(path), "the file is empty", hint=hint)
    if path.suffix.lower() == ".jsonl":
        return JsonFile(text, lines=_jsonl_entries(path, text))
    try:
        return JsonFile(text, value=json.loads(text))
    except json.JSONDecodeError as exc:
        if not text.lstrip().startswith("{"):
            raise InputError(str(path), f"not valid JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}",
                             hint=hint) from exc
    return JsonFile(text, lines=_jsonl_entries(path, text))


def _read_text(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise UserError(f"{path}: {what} file not found", hint="check the path") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(str(path), f"cannot read the file: {exc}",
                         hint="check the file's permissions, and that it is UTF-8 text") from exc


def _jsonl_entries(path: Path, text: str) -> list[tuple[str, Any]]:
    entries = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entries.append((f"line {number}", json.loads(line)))
        except json.JSONDecodeError as exc:
            raise InputError(str(path), f"line {number} is not valid JSON: {exc.msg}",
                             hint="a JSONL file holds one JSON object per line") from exc
    return entries


def _entries(path: Path) -> list[tuple[str, Any]]:
    """The query entries: a JSON list, JSON Lines, or a one-line JSON object (JSON Lines of one query)."""
    found = read_json_file(path, what="query", hint=QUERIES_HINT)
    if found.lines is not None or isinstance(found.value, list):
        return found.entries()
    if isinstance(found.value, dict) and "\n" not in found.text.strip():
        return _jsonl_entries(path, found.text)
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


def load_queries(path: Path | str) -> list[Query]:
    """Every query of a file, checked; a bad entry raises an InputError naming the entry and the field."""
    path = Path(path)
    entries = _entries(path)
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


def load_query_texts(path: Path | str) -> list[str]:
    """Queries to search (not to score): a text file with one query per line, or JSON/JSONL whose entries are
    strings or objects with a ``query`` field (a benchmark file works as it is)."""
    path = Path(path)
    if path.suffix.lower() in {".txt", ".text", ""}:
        try:
            lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
        except FileNotFoundError as exc:
            raise UserError(f"{path}: query file not found", hint="check the path") from exc
        texts = [line for line in lines if line]
        if not texts:
            raise InputError(str(path), "the file holds no queries", hint=TEXTS_HINT)
        return texts
    texts = []
    for position, entry in _entries(path):
        if isinstance(entry, dict):
            entry = entry.get("query")
        if not isinstance(entry, str) or not entry.strip():
            raise InputError(str(path), "expected a non-empty query string", entry=position, field="query",
                             hint=TEXTS_HINT)
        texts.append(entry.strip())
    if not texts:
        raise InputError(str(path), "the file holds no queries", hint=TEXTS_HINT)
    return texts
