"""Answer constraints of every build call: flat, bounded JSON schemas and line regexes over offered positions.

The model never writes an id. It answers with 1-based positions of the items it was shown, bounded by the
number of items, so an answer can only name something that exists; ids come from code afterwards.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, create_model

from a2x_local.taxonomy.config import BuildConfig

VIOLATIONS = ("technical_approach", "data_type", "operation_method", "catch_all", "overlap")
KEYWORD_RE = r"[a-z][a-z0-9_]*"


def number_pattern(n: int) -> str:
    """A regex matching exactly the integers 1..n written without leading zeros (n ≤ 999)."""
    if not 1 <= n <= 999:
        raise ValueError(f"cannot offer {n} positions")
    parts: list[str] = []
    for digits in range(1, len(str(n)) + 1):
        low, high = 10 ** (digits - 1), min(n, 10 ** digits - 1)
        if low > high:
            break
        parts.extend(_range_pattern(str(low), str(high)))
    return "(?:" + "|".join(parts) + ")"


def _range_pattern(low: str, high: str) -> list[str]:
    """Regex alternatives for the same-length decimal range [low, high]."""
    if len(low) == 1:
        return [low if low == high else f"[{low}-{high}]"]
    if low[0] == high[0]:
        return [low[0] + p for p in _range_pattern(low[1:], high[1:])]
    rest = len(low) - 1
    parts = []
    parts += [low[0] + p for p in _range_pattern(low[1:], "9" * rest)]
    if int(low[0]) + 1 <= int(high[0]) - 1:
        first = f"[{int(low[0]) + 1}-{int(high[0]) - 1}]" if int(high[0]) - int(low[0]) > 2 else str(int(low[0]) + 1)
        parts.append(first + "[0-9]" * rest)
    parts += [high[0] + p for p in _range_pattern("0" * rest, high[1:])]
    return parts


def lines_regex(count: int, item: str) -> str:
    """Exactly ``count`` lines `k: <item>` for k = 1..count, in order."""
    return "\n".join(f"{k}: {item}" for k in range(1, count + 1))


def parse_lines(text: str, count: int) -> list[str]:
    """The item part of each `k: item` line (the regex already guaranteed the shape)."""
    lines = text.split("\n")
    if len(lines) != count:
        raise ValueError(f"expected {count} lines, got {len(lines)}")
    return [line.split(": ", 1)[1].strip() for line in lines]


def positions_item(offered: int, most: int) -> str:
    """`NONE` or up to ``most`` comma-separated positions among ``offered``."""
    number = number_pattern(offered)
    most = max(1, min(most, offered))
    return f"(?:NONE|{number}(?:, ?{number}){{0,{most - 1}}})"


def parse_positions(item: str) -> list[int]:
    """Positions of one answer line, de-duplicated in order; [] for NONE."""
    if item == "NONE":
        return []
    return list(dict.fromkeys(int(p) for p in re.split(r", ?", item)))


def keywords_item(config: BuildConfig) -> str:
    word = f"[a-z][a-z0-9_]{{0,{config.keyword_max_chars - 1}}}"
    return f"{word}(?:, {word}){{0,{config.keywords_per_service_max - 1}}}"


def placement_item(offered: int) -> str:
    """`NONE` or `<position> <confidence 0-100>`."""
    return f"(?:NONE|{number_pattern(offered)} (?:100|[1-9]?[0-9]))"


def parse_placement(item: str) -> tuple[int, int] | None:
    if item == "NONE":
        return None
    position, confidence = item.split(" ")
    return int(position), int(confidence)


def _text(limit: int) -> type:
    return Annotated[str, StringConstraints(min_length=1, max_length=limit)]


@cache
def category_model(config: BuildConfig, with_source: int | None = None) -> type[BaseModel]:
    """One designed category; ``with_source`` adds the refine's link to the current category it continues."""
    keyword = Annotated[str, StringConstraints(pattern=f"^{KEYWORD_RE}$", max_length=config.keyword_max_chars)]
    fields: dict[str, object] = {}
    if with_source is not None:
        fields["source"] = (int, Field(ge=0, le=with_source))
    fields.update(
        name=(_text(config.name_max_chars), ...),
        description=(_text(config.description_max_chars), ...),
        decision_rule=(_text(config.decision_rule_max_chars), ...),
        boundary=(_text(config.boundary_max_chars), ...),
        keywords=(list[keyword], Field(max_length=config.category_keywords_max)),
    )
    name = "Category" if with_source is None else f"RevisedCategory{with_source}"
    return create_model(name, __config__=ConfigDict(extra="forbid"), **fields)


@cache
def design_model(config: BuildConfig, low: int, high: int, with_source: int | None = None) -> type[BaseModel]:
    """The classification axis first, then a set of ``low``..``high`` categories (the schema, not the prompt,
    enforces at most N): stating the axis before the categories keeps the siblings on it."""
    item = category_model(config, with_source)
    suffix = f"{low}_{high}" + ("" if with_source is None else f"_s{with_source}")
    return create_model(f"Design_{suffix}", __config__=ConfigDict(extra="forbid"),
                        dimension=(_text(config.dimension_max_chars), ...),
                        categories=(list[item], Field(min_length=low, max_length=high)))


class Verdict(BaseModel):
    model_config = ConfigDict(extra="forbid")
    violations: list[Literal[VIOLATIONS]] = Field(max_length=len(VIOLATIONS))


@cache
def validation_model(categories: int) -> type[BaseModel]:
    """Exactly one verdict per offered category, in order."""
    return create_model(f"Validation_{categories}", __config__=ConfigDict(extra="forbid"),
                        verdicts=(list[Verdict], Field(min_length=categories, max_length=categories)))


def design_budget(config: BuildConfig, categories: int, *, with_source: bool = False) -> int:
    """Tokens a complete design answer may need at the schema's bounds."""
    per = (config.name_max_chars + config.description_max_chars + config.decision_rule_max_chars
           + config.boundary_max_chars + config.category_keywords_max * (config.keyword_max_chars + 3) + 90
           + (14 if with_source else 0))
    return int((categories * per + config.dimension_max_chars + 20) / config.budget_chars_per_token) + 32


def typical_budget(config: BuildConfig, category_chars: Sequence[int], extra: int) -> int:
    """Tokens of an answer that repeats categories of the given JSON lengths and adds ``extra`` of their mean
    length: a realistic budget for a refine, which mostly returns the current set (a longer answer is cut off and
    retried by the engine with twice the budget)."""
    mean = sum(category_chars) / len(category_chars) if category_chars else 0.0
    total = sum(category_chars) + extra * mean + 14 * (len(category_chars) + extra)
    return int((total + config.dimension_max_chars + 20) / config.budget_chars_per_token) + 32


def lines_budget(lines: int, chars_per_line: int, chars_per_token: float = 1.0) -> int:
    """Tokens for ``lines`` answer lines of at most ``chars_per_line`` characters."""
    return int(lines * (chars_per_line + 1) / chars_per_token) + 8
