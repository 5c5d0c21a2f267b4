"""Typed engine settings: the `[engine]` table of configs/default.toml, a model alias's recommendations, then flags."""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from a2x_local.errors import UserError
from a2x_local.llm.constraints import DEFAULT_STRUCTURED_BACKEND, StructuredBackend
from a2x_local.settings import validation_problems

EngineName = Literal["vllm", "transformers", "openai"]
ENGINE_NAMES: tuple[str, ...] = get_args(EngineName)


class OpenAIConfig(BaseModel):
    """An OpenAI-compatible server on the local network (`vllm serve`, llama.cpp server)."""

    model_config = ConfigDict(extra="forbid")

    base_url: str = ""
    api_key: str = "EMPTY"
    served_model: str = ""
    concurrency: int = Field(16, ge=1, le=1024)
    timeout_s: float = Field(120.0, gt=0)
    max_retries: int = Field(3, ge=0, le=20)


class TransformersConfig(BaseModel):
    """transformers + Outlines, for machines without vLLM."""

    model_config = ConfigDict(extra="forbid")

    batch_size: int = Field(32, ge=1)
    device: str = "auto"


class EngineConfig(BaseModel):
    """Everything an engine needs besides the model path. Field names match the `[engine]` keys."""

    model_config = ConfigDict(extra="forbid")

    name: EngineName = "vllm"
    model: str = ""
    dtype: str = "auto"
    max_model_len: int = Field(8192, ge=16)
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1)
    tensor_parallel_size: int = Field(1, ge=1)
    enable_prefix_caching: bool = True
    quantization: str = ""
    structured_backend: StructuredBackend = DEFAULT_STRUCTURED_BACKEND
    seed: int = 0
    enforce_eager: bool = False
    cpu_kvcache_space_gb: int = Field(4, ge=1)
    multiprocessing: Literal["auto"] | bool = "auto"
    chat_template_kwargs: dict[str, Any] = Field(default_factory=dict)
    openai: OpenAIConfig = Field(default_factory=OpenAIConfig)
    transformers: TransformersConfig = Field(default_factory=TransformersConfig)


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
                        hint="See the commented [engine] table in configs/default.toml.") from exc
