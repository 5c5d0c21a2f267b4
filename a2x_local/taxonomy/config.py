"""The build's typed settings, read from the `[build]` section of the configuration (every number lives there)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from a2x_local.settings import Settings, section_config


class BuildConfig(BaseModel):
    """Thresholds and budgets of one build; recorded with the build so a resume can insist on the same ones."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    leaf_max_services: int = Field(40, ge=1)
    max_depth: int = Field(3, ge=1, le=8)
    max_children: int = Field(20, ge=2, le=99)
    min_children: int = Field(2, ge=1)
    keyword_path_min_services: int = Field(500, ge=1)
    keyword_batch_size: int = Field(50, ge=1, le=200)
    keywords_per_service_max: int = Field(5, ge=1, le=10)
    keyword_max_chars: int = Field(32, ge=4, le=64)
    keyword_table_max: int = Field(300, ge=10)
    keyword_merge: Literal["embedding", "stem"] = "embedding"
    keyword_merge_similarity: float = Field(0.8, gt=0.0, le=1.0)
    design_description_chars: int = Field(150, ge=20)
    name_max_chars: int = Field(60, ge=8)
    description_max_chars: int = Field(200, ge=20)
    boundary_max_chars: int = Field(200, ge=10)
    decision_rule_max_chars: int = Field(160, ge=10)
    category_keywords_max: int = Field(12, ge=1, le=50)
    root_validation_rounds: int = Field(2, ge=0, le=5)
    redesign_min_categories: int = Field(3, ge=1)
    assign_batch_size: int = Field(15, ge=1, le=100)
    assign_description_chars: int = Field(400, ge=20)
    generic_divisor: int = Field(3, ge=1)
    refine_passes: int = Field(3, ge=1, le=10)
    refine_samples: int = Field(50, ge=1)
    refine_tiny_size: int = Field(5, ge=0)
    tiny_category_max: int = Field(2, ge=0)
    cross_domain: bool = True
    cross_domain_max_extra: int = Field(1, ge=1, le=5)
    cross_domain_batch_size: int = Field(20, ge=1, le=100)
    cross_domain_min_confidence: int = Field(40, ge=0, le=100)
    budget_chars_per_token: float = Field(3.0, gt=0.0)
    max_failed_fraction: float = Field(0.25, ge=0.0, le=1.0)
    temperature: float = Field(0.0, ge=0.0)
    seed: int | None = None

    @model_validator(mode="after")
    def _consistent(self) -> BuildConfig:
        if self.min_children > self.max_children:
            raise ValueError("min_children must not exceed max_children")
        if self.redesign_min_categories > self.max_children:
            raise ValueError("redesign_min_categories must not exceed max_children")
        return self

    def generic_limit(self, categories: int) -> int:
        """A service matching more categories than this is generic: max(1, ⌊|C| / divisor⌋)."""
        return max(1, categories // self.generic_divisor)

    def thresholds(self) -> dict[str, Any]:
        return self.model_dump()


def build_config(settings: Settings, **overrides: Any) -> BuildConfig:
    """The `[build]` section with command-line overrides (``None`` means "not given")."""
    return section_config(settings, "build", BuildConfig, **overrides)
