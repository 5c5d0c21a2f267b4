"""The `[lifecycle]` table: incremental placement, the nightly job's rebuild threshold, gate and retention."""

from __future__ import annotations

from typing import ClassVar, Literal, get_args

from pydantic import ConfigDict, Field

from a2x_local.settings import SectionConfig

Placement = Literal["model", "embedding"]
PLACEMENTS: tuple[str, ...] = get_args(Placement)


class LifecycleConfig(SectionConfig):
    """Every `[lifecycle]` key; the packaged default.toml says what each one means."""

    model_config = ConfigDict(frozen=True)
    section: ClassVar[str] = "lifecycle"

    placement: Placement
    placement_mode: Literal["get_all", "get_important", "get_one"]
    placement_description_chars: int = Field(ge=20, le=20_000)
    embedding_model: str
    embedding_leaf_examples: int = Field(ge=0, le=10_000)
    rebuild_above_share: float = Field(ge=0, le=1)
    keep_trees: int = Field(ge=1, le=10_000)
    max_drop: float = Field(ge=0, le=100)
    report_dir: str
