"""Models that decide badly, for a `ScriptedEngine`: what a weak real model does, played by a rule, so the guards
against it (a query's budget, the over-selection fallback, the position-bias measure, bounded and de-repeated
answers) are tested without one. Test and benchmark tools, never product defaults.

- `SelectEverything`: every descent and selection answer takes every option it may (a model that cannot decide
  and answers "all of them").
- `FirstOption`: every answer is the first option shown (a model that chooses by position, not by meaning).
- `Rambler`: a model that writes on. ``bounded`` (what a constrained engine lets it do): every string of a JSON
  answer is the rule's own text repeated up to the length its schema allows, and every answer line of keywords
  repeats its first keyword as often as the line may; otherwise (an engine that ignores the constraint) each
  answer is the rule's answer followed by the same text over and over, far past any token budget.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from a2x_local.llm import JsonConstraint, Request
from a2x_local.search import NONE

Rule = Callable[[Request], str]


class SelectEverything:
    """Answers every option an answer may hold, in the order shown ("1,2,…,n")."""

    def __init__(self) -> None:
        self.requests = 0

    def __call__(self, request: Request) -> str:
        self.requests += 1
        context = request.context
        count = min(len(context["options"]), context["max_items"])
        return ",".join(str(k) for k in range(1, count + 1)) or NONE


class FirstOption:
    """Answers the first option shown, whatever the request."""

    def __init__(self) -> None:
        self.requests = 0

    def __call__(self, request: Request) -> str:
        self.requests += 1
        return "1" if request.context.get("options") else NONE


# A line of keywords: "3: weather, forecast".
_KEYWORD_LINE = re.compile(r"^(\d+): ([^,\n]+)(?:, [^\n]*)?$")


class Rambler:
    """Wraps a rule whose answers are valid, and makes them long and repetitive (see the module)."""

    def __init__(self, rule: Rule, *, bounded: bool = True, repeats: int = 400) -> None:
        self.rule = rule
        self.bounded = bounded
        self.repeats = repeats

    def __call__(self, request: Request) -> str:
        answer = self.rule(request)
        if not self.bounded:
            return answer + (" " + answer) * self.repeats
        if isinstance(request.constraint, JsonConstraint):
            schema = request.constraint.schema()
            return json.dumps(_filled(json.loads(answer), schema, schema.get("$defs", {})), ensure_ascii=False)
        most = request.context.get("max_keywords")
        if request.context.get("step") == "keywords" and most:
            return "\n".join(_repeat_keyword(line, most) for line in answer.split("\n"))
        return answer


def _repeat_keyword(line: str, most: int) -> str:
    match = _KEYWORD_LINE.match(line)
    if match is None:
        return line
    return f"{match.group(1)}: " + ", ".join([match.group(2)] * most)


def _filled(value: Any, schema: dict[str, Any], defs: dict[str, Any]) -> Any:
    """``value`` with every string repeated up to the schema's maxLength (whole repeats, then cut there)."""
    if "$ref" in schema:
        schema = defs[schema["$ref"].rsplit("/", 1)[-1]]
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        return {key: _filled(item, properties.get(key, {}), defs) for key, item in value.items()}
    if isinstance(value, list):
        return [_filled(item, schema.get("items", {}), defs) for item in value]
    if isinstance(value, str) and value and schema.get("maxLength") and not schema.get("pattern"):
        limit = schema["maxLength"]
        text = value
        while len(text) + 1 + len(value) <= limit:
            text += " " + value
        return text
    return value
