"""Typed settings of the LLM search methods (A2X descent, full catalogue, select), from the `[search]` table."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, StrictBool, create_model

from a2x_local.errors import UserError
from a2x_local.search.types import Mode
from a2x_local.settings import SectionConfig, register_named_table

# The table of named lever settings (`[search] preset` picks one; docs/search.md "Presets").
PRESETS_TABLE = "search_presets"


class LlmSearchConfig(SectionConfig):
    """Every `[search]` key; the packaged default.toml says what each one means."""

    model_config = ConfigDict(frozen=True)
    section: ClassVar[str] = "search"

    preset: str
    default_mode: Mode
    merge_threshold: int = Field(ge=0, le=100_000)
    group_lists: Literal["merged", "stable", "per_node"]
    group_cap: int = Field(ge=1, le=10_000)
    named_group_cap: int = Field(ge=1, le=10_000)
    pack_groups: StrictBool
    selection_prompt_tokens: int = Field(ge=0, le=16_777_216)
    max_children_selected: int = Field(ge=0, le=10_000)
    max_services_selected: int = Field(ge=0, le=10_000)
    category_description_chars: int = Field(ge=0, le=100_000)
    boundary_chars: int = Field(ge=0, le=100_000)
    service_description_chars: int = Field(ge=0, le=100_000)
    name_chars: int = Field(ge=8, le=10_000)
    category_lines: Literal["full", "compact"]
    compact_category_chars: int = Field(ge=0, le=100_000)
    boundary_min_overlap: float = Field(ge=0, le=1)
    service_lines: Literal["full", "compact"]
    compact_service_chars: int = Field(ge=0, le=100_000)
    direct_select_below: int = Field(ge=0, le=10_000_000)
    prerank_min: int = Field(ge=0, le=10_000)
    prerank_share: float = Field(ge=0, le=1)
    prerank_rest: Literal["round", "names"]
    prerank_depth: int = Field(ge=1, le=1_000_000)
    prompt_layout: Literal["query_last", "query_first"]
    language_line: Literal["auto", "always", "never"]
    other_services_child: Literal["root", "all", "none"]
    other_services_examples: int = Field(ge=0, le=100)
    overselect_share: float = Field(ge=0, le=1)
    overselect_keep: int = Field(ge=1, le=99)
    max_calls_per_query: int = Field(ge=0, le=100_000)
    max_prompt_tokens_per_query: int = Field(ge=0, le=100_000_000)
    option_order: Literal["tree", "shuffled"]
    select_top_k: int = Field(ge=1, le=10_000)
    rescue_top_k: int = Field(ge=1, le=10_000)
    answer_margin_tokens: int = Field(ge=0, le=10_000)
    temperature: float = Field(ge=0, le=2.0)
    seed: int = Field(ge=0, le=4_294_967_295)

    @classmethod
    def load(cls, config: Mapping[str, Any], **overrides: Any) -> Self:
        """The table with its preset's levers over it (`[search_presets.NAME]`), then ``overrides`` over both."""
        table = config.get(cls.section, {})
        name = overrides.get("preset") or table.get("preset") or "default"
        presets = config.get(PRESETS_TABLE, {})
        if name not in presets:
            raise UserError(f"unknown search preset '{name}'",
                            hint=f"choose one of: {', '.join(presets)}; or define [{PRESETS_TABLE}.{name}] in your"
                            " config.toml")
        bundle = presets[name]
        unknown = sorted(set(bundle) - set(cls.model_fields) - {"preset"})
        if unknown:
            raise UserError(f"[{PRESETS_TABLE}.{name}] sets unknown [search] keys: {', '.join(unknown)}",
                            hint="a preset sets keys of the [search] table (docs/search.md, Presets)")
        given = {key: value for key, value in overrides.items() if value is not None}
        return super().load(config, **{**bundle, **given, "preset": name})


def _preset_model() -> type[BaseModel]:
    """What one `[search_presets.NAME]` table may hold: any `[search]` key but `preset` (its values are checked when
    the preset is used, over the [search] table), so a misspelt key is named when the command starts."""
    fields: dict[str, Any] = {name: (info.annotation | None, None) for name, info in
                              LlmSearchConfig.model_fields.items() if name != "preset"}
    return create_model("SearchPreset", __config__=ConfigDict(extra="forbid"), **fields)


register_named_table(PRESETS_TABLE, _preset_model())


def prerank_shown(config: LlmSearchConfig, size: int) -> int:
    """How many of a group's ``size`` services pre-ranking shows first (all of them when it is off)."""
    if not config.prerank_min:
        return size
    return min(size, max(config.prerank_min, math.ceil(config.prerank_share * size)))


def answer_limit(mode: str, cap: int, offered: int) -> int:
    """Most positions one answer may hold: one in get_one, else the cap (0 = every offered item)."""
    if mode == "get_one":
        return 1
    return min(cap, offered) if cap else offered


def answer_cap(mode: str, limit: int, offered: int) -> int | None:
    """The cap a prompt states (None: none to state): the answer ``limit`` where it is below what is offered,
    outside get_one. An answer holding that many was capped, and may have left out wanted items."""
    return limit if mode != "get_one" and limit < offered else None
