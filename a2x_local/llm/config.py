"""Typed engine settings: the `[engine]` table (defaults, user files), a model alias's recommendations, then flags."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, ValidationError, field_validator

from a2x_local.errors import UserError
from a2x_local.llm.constraints import StructuredBackend
from a2x_local.llm.engines import engine_names
from a2x_local.settings import SectionConfig, validation_problems

# The name of a registered engine (llm/engines.py): the built-in vllm, transformers, openai, or one added later.
EngineName = str


class OpenAIConfig(SectionConfig):
    """An OpenAI-compatible server on the local network (`vllm serve`, llama.cpp server)."""

    section: ClassVar[str] = "engine.openai"

    base_url: str
    api_key: str
    served_model: str
    concurrency: int = Field(ge=1, le=1024)
    timeout_s: float = Field(gt=0)
    max_retries: int = Field(ge=0, le=20)


class TransformersConfig(SectionConfig):
    """transformers + Outlines, for machines without vLLM."""

    section: ClassVar[str] = "engine.transformers"

    batch_size: int = Field(ge=1)
    device: str


class EngineConfig(SectionConfig):
    """Everything an engine needs besides the model path. Field names match the `[engine]` keys."""

    section: ClassVar[str] = "engine"

    name: EngineName
    model: str
    dtype: str
    max_model_len: int = Field(ge=16)
    gpu_memory_utilization: float = Field(gt=0, le=1)
    tensor_parallel_size: int = Field(ge=1)
    enable_prefix_caching: bool
    quantization: str
    structured_backend: StructuredBackend
    seed: int
    enforce_eager: bool
    cpu_kvcache_space_gb: int = Field(ge=1)
    multiprocessing: Literal["auto"] | bool
    chat_template_kwargs: dict[str, Any]
    openai: OpenAIConfig
    transformers: TransformersConfig

    @field_validator("name")
    @classmethod
    def _registered(cls, name: str) -> str:
        if name not in engine_names():
            raise ValueError(f"unknown engine '{name}' (one of: {', '.join(engine_names())})")
        return name


_NESTED = {"openai": set(OpenAIConfig.model_fields), "transformers": set(TransformersConfig.model_fields)}


def nest_overrides(overrides: dict[str, Any]) -> dict[str, Any]:
    """Flat flag values (``base_url=...``) placed in the table they belong to (``openai.base_url``)."""
    nested: dict[str, Any] = {}
    for key, value in overrides.items():
        if value is None:
            continue
        table = next((name for name, keys in _NESTED.items() if key in keys and key not in EngineConfig.model_fields),
                     None)
        if table:
            nested.setdefault(table, {})[key] = value
        else:
            nested[key] = value
    return nested


def engine_config(data: dict[str, Any], *, where: str) -> EngineConfig:
    """Validate merged settings; a bad key or value names where it came from."""
    try:
        return EngineConfig.model_validate(data)
    except ValidationError as exc:
        raise UserError(f"engine settings ({where}) are invalid: {validation_problems(exc)}",
                        hint="See the [engine] table in docs/configuration.md.") from exc
