"""Typed settings of the LLM search methods (A2X descent, full catalogue, select), from the `[search]` table."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from a2x_local.errors import UserError
from a2x_local.settings import Settings, section_config

Mode = Literal["get_all", "get_important", "get_one"]
MODES: tuple[str, ...] = ("get_all", "get_important", "get_one")

# The options of the LLM methods that configure the engine: the keyword arguments of
# `a2x_local.cli.engine_options.engine_from_options` besides ``engine`` (the CLI flags of the same names).
ENGINE_KEYS: tuple[str, ...] = ("model", "base_url", "max_model_len", "dtype", "structured_backend",
                                "gpu_memory_utilization", "tensor_parallel_size", "quantization")


class LlmSearchConfig(BaseModel):
    """Every `[search]` key; configs/default.toml says what each one means."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    default_mode: Mode = "get_all"
    merge_threshold: int = Field(30, ge=0)
    group_cap: int = Field(60, ge=1)
    selection_prompt_tokens: int = Field(6000, ge=0)
    max_children_selected: int = Field(5, ge=1)
    max_services_selected: int = Field(20, ge=1)
    category_description_chars: int = Field(120, ge=0)
    boundary_chars: int = Field(120, ge=0)
    service_description_chars: int = Field(200, ge=0)
    name_chars: int = Field(80, ge=8)
    select_top_k: int = Field(20, ge=1)
    rescue_top_k: int = Field(10, ge=1)
    answer_margin_tokens: int = Field(4, ge=0)
    temperature: float = Field(0.0, ge=0)
    seed: int = 0


def llm_search_config(settings: Settings, **overrides: object) -> LlmSearchConfig:
    """The `[search]` table with ``overrides`` (None values ignored), validated with a readable error."""
    return section_config(settings, "search", LlmSearchConfig, **overrides)


def check_mode(mode: str | None, default: str) -> str:
    """A request's mode, or the default; an unknown mode is a user error listing the known ones."""
    chosen = mode or default
    if chosen not in MODES:
        raise UserError(f"unknown search mode '{chosen}'", hint=f"choose one of: {', '.join(MODES)}")
    return chosen
