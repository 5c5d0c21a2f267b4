"""Decompositions given in a file (`--steps FILE`), for evaluation with known steps and for plans made by hand.

Accepted, as JSON or JSONL:
- one decomposition: ``{"steps": [...]}`` or a bare list of steps (it serves a single request);
- decompositions per request: ``[{"query": "...", "steps": [...]}, ...]`` (a benchmark query file that carries
  ``steps`` works as it is), matched to requests by their text, whitespace aside.
A step is a string (its task) or ``{"task": "...", "id": "...", "depends_on": ["..."]}``; ids are the file's own
names, renumbered s1, s2, ... in order, and a step may depend only on earlier steps.

A file obeys the bounds of a model's decomposition (`[compose]` max_steps steps of at most step_chars characters)
and is at most `[compose]` max_steps_file_bytes: ten thousand chained steps took ten minutes to plan.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from a2x_local.compose.types import Step
from a2x_local.errors import InputError, UserError
from a2x_local.jsonfiles import JsonFile, JsonLimits, read_json_file

STEPS_HINT = 'expected {"steps": [{"task": "...", "depends_on": []}, ...]}, or a list of {"query", "steps"}'


@dataclass(frozen=True)
class StepsBounds:
    """How many steps one decomposition may hold, and how long a task may be (the `[compose]` keys)."""

    max_steps: int
    step_chars: int


def _key(text: str) -> str:
    return " ".join(text.split()).casefold()


@dataclass(frozen=True)
class StepsBook:
    """The decompositions of one file: one for any request (``single``), or one per request text."""

    path: Path
    single: tuple[Step, ...] | None
    by_request: dict[str, tuple[Step, ...]]

    @property
    def label(self) -> str:
        return f"file:{self.path.name}"

    def steps_for(self, request: str) -> list[Step]:
        if self.single is not None:
            return list(self.single)
        found = self.by_request.get(_key(request))
        if found is None:
            shown = " ".join(request.split())
            raise UserError(f"{self.path}: no steps for the request {shown[:80]!r}",
                            hint="add an entry {\"query\": ..., \"steps\": [...]} for it, or leave out --steps")
        return list(found)

    def check_covers(self, requests: Sequence[str]) -> None:
        """Fail before any work when a request has no decomposition in the file."""
        for request in requests:
            self.steps_for(request)

    def check_bounds(self, bounds: StepsBounds) -> None:
        """Every decomposition within ``bounds`` (a book made elsewhere is checked when a composer takes it)."""
        books = [("0", self.single)] if self.single is not None else list(self.by_request.items())
        for where, steps in books:
            _check_bounds(self.path, f"query {where[:40]!r}" if self.single is None else where,
                          [step.task for step in steps], bounds)


def _check_bounds(path: Path, where: str, tasks: Sequence[str], bounds: StepsBounds) -> None:
    hint = "split the request, or raise [compose] max_steps (at most 20) / step_chars"
    if len(tasks) > bounds.max_steps:
        raise InputError(str(path), f"{len(tasks):,} steps, more than [compose] max_steps = {bounds.max_steps}",
                         entry=where, field="steps", hint=hint)
    for index, task in enumerate(tasks):
        if len(task) > bounds.step_chars:
            raise InputError(str(path), f"the task has {len(task):,} characters, more than [compose] step_chars ="
                                        f" {bounds.step_chars}", entry=where, field=f"steps[{index}].task", hint=hint)


def parse_steps(path: Path, where: str, raw: Any, bounds: StepsBounds | None = None) -> tuple[Step, ...]:
    """One decomposition from the file, checked (within ``bounds`` when given, before anything else is looked at);
    errors name the file, the entry and the field."""
    if not isinstance(raw, list) or not raw:
        raise InputError(str(path), "expected a non-empty list of steps", entry=where, field="steps",
                         hint=STEPS_HINT)
    if bounds is not None and len(raw) > bounds.max_steps:
        _check_bounds(path, where, [""] * len(raw), bounds)
    given: dict[str, int] = {}
    tasks: list[tuple[str, list[str]]] = []
    for index, item in enumerate(raw):
        field = f"steps[{index}]"
        if isinstance(item, str):
            item = {"task": item}
        if not isinstance(item, dict):
            raise InputError(str(path), "a step is a string or an object", entry=where, field=field, hint=STEPS_HINT)
        task = item.get("task")
        if not isinstance(task, str) or not task.strip():
            raise InputError(str(path), "missing or empty task", entry=where, field=f"{field}.task", hint=STEPS_HINT)
        step_id = item.get("id", f"s{index + 1}")
        if not isinstance(step_id, str | int) or str(step_id) in given:
            raise InputError(str(path), "step ids must be unique strings", entry=where, field=f"{field}.id",
                             hint=STEPS_HINT)
        depends = item.get("depends_on", [])
        if not isinstance(depends, list) or not all(isinstance(d, str | int) for d in depends):
            raise InputError(str(path), "depends_on is a list of step ids", entry=where, field=f"{field}.depends_on",
                             hint=STEPS_HINT)
        unknown = [str(d) for d in depends if str(d) not in given]
        if unknown:
            raise InputError(str(path), f"depends on {unknown[0]!r}, which is not an earlier step", entry=where,
                             field=f"{field}.depends_on", hint="a step may depend only on the steps before it")
        given[str(step_id)] = index
        tasks.append((" ".join(task.split()), [str(d) for d in depends]))
    if bounds is not None:
        _check_bounds(path, where, [task for task, _ in tasks], bounds)
    return tuple(Step(id=f"s{index + 1}", task=task,
                      depends_on=sorted({f"s{given[d] + 1}" for d in depends}, key=lambda s: int(s[1:])))
                 for index, (task, depends) in enumerate(tasks))


def _content(found: JsonFile) -> Any:
    """The file as one value: JSON Lines are the list of their lines, and one line is that line's value."""
    if found.lines is None:
        return found.value
    values = [value for _, value in found.lines]
    return values[0] if len(values) == 1 else values


def load_steps_file(path: Path | str, limits: JsonLimits | None = None, bounds: StepsBounds | None = None, *,
                    max_bytes: int | None = None) -> StepsBook:
    """The decompositions of a steps file, every entry checked before any is used: a file over ``limits`` (default,
    the packaged `[registry]` limits) or over ``max_bytes`` is refused, and so is a decomposition outside
    ``bounds``."""
    path = Path(path)
    limits = limits or JsonLimits.defaults()
    if max_bytes is not None and max_bytes < limits.max_file_bytes:
        limits = replace(limits, max_file_bytes=max_bytes)
    found = read_json_file(path, what="steps", hint=STEPS_HINT, limits=limits)
    data = _content(found)
    if isinstance(data, dict) and "steps" in data and "query" not in data:
        return StepsBook(path, parse_steps(path, "0", data["steps"], bounds), {})
    if isinstance(data, list) and data and not any(isinstance(e, dict) and "query" in e for e in data):
        return StepsBook(path, parse_steps(path, "0", data, bounds), {})
    by_request: dict[str, tuple[Step, ...]] = {}
    for where, entry in found.entries():
        if not isinstance(entry, dict) or not isinstance(entry.get("query"), str) or not entry["query"].strip():
            raise InputError(str(path), "expected an object with a non-empty 'query'", entry=where, field="query",
                             hint=STEPS_HINT)
        if "steps" not in entry:
            continue  # a benchmark query without a decomposition: requests it names get none
        by_request[_key(entry["query"])] = parse_steps(path, f"{where} (query {entry['query'][:40]!r})",
                                                       entry["steps"], bounds)
    if not by_request:
        raise InputError(str(path), "no entry carries 'steps'", hint=STEPS_HINT)
    return StepsBook(path, None, by_request)
