"""The build's typed settings, read from the `[build]` section of the configuration (every number lives there)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import ConfigDict, Field, model_validator

from a2x_local.settings import SectionConfig


class BuildConfig(SectionConfig):
    """Thresholds and budgets of one build; recorded with the build so a resume can insist on the same ones."""

    model_config = ConfigDict(frozen=True)
    section: ClassVar[str] = "build"

    leaf_max_services: int = Field(ge=1)
    max_depth: int = Field(ge=1, le=8)
    max_children: int = Field(ge=2, le=99)
    min_children: int = Field(ge=1)
    keyword_path_min_services: int = Field(ge=1)
    keyword_batch_size: int = Field(ge=1, le=200)
    keywords_per_service_max: int = Field(ge=1, le=10)
    keyword_max_chars: int = Field(ge=4, le=64)
    keyword_table_max: int = Field(ge=10)
    keyword_prefix_merge_min_chars: int = Field(ge=0)
    keyword_merge: Literal["embedding", "stem"]
    keyword_merge_similarity: float = Field(gt=0.0, le=1.0)
    design_description_chars: int = Field(ge=20)
    dimension_max_chars: int = Field(ge=10)
    name_max_chars: int = Field(ge=8)
    description_max_chars: int = Field(ge=20)
    boundary_max_chars: int = Field(ge=10)
    decision_rule_max_chars: int = Field(ge=10)
    category_keywords_max: int = Field(ge=1, le=50)
    root_validation_rounds: int = Field(ge=0, le=5)
    redesign_min_categories: int = Field(ge=1)
    assign_mode: Literal["batched", "per_service"]
    assign_batch_size: int = Field(ge=1, le=100)
    assign_reasoning_chars: int = Field(ge=20, le=1000)
    assign_description_chars: int = Field(ge=20)
    generic_divisor: int = Field(ge=1)
    refine_passes: int = Field(ge=1, le=10)
    refine_samples: int = Field(ge=1)
    refine_min_description_chars: int = Field(ge=10)
    refine_new_categories_estimate: int = Field(ge=0)
    refine_tiny_size: int = Field(ge=0)
    tiny_category_max: int = Field(ge=0)
    cross_domain: bool
    cross_domain_max_extra: int = Field(ge=1, le=5)
    cross_domain_batch_size: int = Field(ge=1, le=100)
    cross_domain_min_confidence: int = Field(ge=0, le=100)
    budget_chars_per_token: float = Field(gt=0.0)
    max_failed_fraction: float = Field(ge=0.0, le=1.0)
    batch_boundaries: Literal["content", "fixed"]
    temperature: float = Field(ge=0.0)
    category_language: str = Field(min_length=1, max_length=60)
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
