"""The build's typed settings, read from the `[build]` section of the configuration (every number lives there)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import ConfigDict, Field, StrictBool, model_validator

from a2x_local.settings import SectionConfig


class BuildConfig(SectionConfig):
    """Thresholds and budgets of one build; recorded with the build so a resume can insist on the same ones."""

    model_config = ConfigDict(frozen=True)
    section: ClassVar[str] = "build"

    leaf_max_services: int = Field(ge=1, le=10_000)
    max_depth: int = Field(ge=1, le=8)
    max_children: int = Field(ge=2, le=99)
    min_children: int = Field(ge=1, le=99)
    keyword_path_min_services: int = Field(ge=1, le=10_000_000)
    keyword_batch_size: int = Field(ge=1, le=200)
    keywords_per_service_max: int = Field(ge=1, le=10)
    keyword_max_chars: int = Field(ge=4, le=64)
    keyword_table_max: int = Field(ge=10, le=100_000)
    keyword_prefix_merge_min_chars: int = Field(ge=0, le=64)
    keyword_merge: Literal["embedding", "stem"]
    keyword_merge_similarity: float = Field(gt=0.0, le=1.0)
    design_description_chars: int = Field(ge=20, le=10_000)
    dimension_max_chars: int = Field(ge=10, le=1000)
    name_max_chars: int = Field(ge=8, le=300)
    description_max_chars: int = Field(ge=20, le=2000)
    boundary_max_chars: int = Field(ge=10, le=2000)
    decision_rule_max_chars: int = Field(ge=10, le=2000)
    category_keywords_max: int = Field(ge=1, le=50)
    root_validation_rounds: int = Field(ge=0, le=5)
    redesign_min_categories: int = Field(ge=1, le=99)
    assign_mode: Literal["batched", "per_service"]
    assign_batch_size: int = Field(ge=1, le=100)
    assign_reasoning_chars: int = Field(ge=20, le=1000)
    assign_description_chars: int = Field(ge=20, le=20_000)
    generic_divisor: int = Field(ge=1, le=1000)
    refine_passes: int = Field(ge=1, le=10)
    refine_samples: int = Field(ge=1, le=10_000)
    refine_min_description_chars: int = Field(ge=10, le=2000)
    refine_new_categories_estimate: int = Field(ge=0, le=99)
    refine_tiny_size: int = Field(ge=0, le=10_000)
    tiny_category_max: int = Field(ge=0, le=99)
    cross_domain: StrictBool
    cross_domain_max_extra: int = Field(ge=1, le=5)
    cross_domain_batch_size: int = Field(ge=1, le=100)
    cross_domain_min_confidence: int = Field(ge=0, le=100)
    budget_chars_per_token: float = Field(gt=0.0, le=100.0)
    max_failed_fraction: float = Field(ge=0.0, le=1.0)
    batch_boundaries: Literal["content", "fixed"]
    temperature: float = Field(ge=0.0, le=2.0)
    category_language: str = Field(min_length=1, max_length=60)
    seed: int | None = Field(default=None, ge=0, le=4_294_967_295)

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
