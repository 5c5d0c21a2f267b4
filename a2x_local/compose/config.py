"""Typed settings of compositional routing, from the `[compose]` table (default.toml says what each key means)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import ConfigDict, Field, StrictBool, field_validator

from a2x_local.compose.compatibility import SIGNALS
from a2x_local.settings import SectionConfig

DecomposerName = Literal["auto", "model", "rule"]
DECOMPOSERS: tuple[str, ...] = ("auto", "model", "rule")


class ComposeConfig(SectionConfig):
    """Every `[compose]` key."""

    model_config = ConfigDict(frozen=True)
    section: ClassVar[str] = "compose"

    decomposer: DecomposerName
    max_steps: int = Field(ge=1, le=20)
    step_chars: int = Field(ge=20, le=2000)
    request_chars: int = Field(ge=50, le=100_000)
    max_steps_file_bytes: int = Field(ge=1024, le=1_073_741_824)
    step_method: str
    candidates: int = Field(ge=1, le=100)
    alpha: float = Field(ge=0, le=1)
    signals: tuple[str, ...]
    probe: StrictBool
    named_services: StrictBool
    neighbour_penalty: float = Field(ge=0, le=10)
    credit_substitutes: StrictBool
    ranking_shares: Literal["turns", "confidence"]
    share_floor: float = Field(gt=0, le=1)
    confidence_z: float = Field(ge=-100.0, le=100.0)
    confidence_scale: float = Field(gt=0, le=100.0)
    low_confidence: float = Field(ge=0, le=1)
    rerank: StrictBool
    rerank_candidates: int = Field(ge=2, le=30)
    sad: StrictBool
    sad_hints: int = Field(ge=1, le=100)
    sad_rounds: int = Field(ge=0, le=5)
    sad_stop_jaccard: float = Field(ge=0, le=1)
    budget_chars_per_token: float = Field(gt=0, le=100.0)
    temperature: float = Field(ge=0, le=2.0)
    seed: int = Field(ge=0, le=4_294_967_295)

    @field_validator("signals")
    @classmethod
    def _known_signals(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [name for name in value if name not in SIGNALS]
        if unknown:
            raise ValueError(f"unknown compatibility signals {unknown}; choose from {list(SIGNALS)}")
        return tuple(dict.fromkeys(value))

