"""Typed engine settings: the `[engine]` table (defaults, user files), a model alias's recommendations, then flags."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, StrictBool, ValidationError, field_validator

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
    timeout_s: float = Field(gt=0, le=86400.0)
    max_retries: int = Field(ge=0, le=20)


class TransformersConfig(SectionConfig):
    """transformers + Outlines, for machines without vLLM."""

    section: ClassVar[str] = "engine.transformers"

    batch_size: int = Field(ge=1, le=4096)
    device: str


class RayConfig(SectionConfig):
    """The replicas' Ray resources, and the private Ray instance started when no cluster address is given."""

    section: ClassVar[str] = "engine.ray"

    num_cpus: int = Field(ge=0, le=65_536)
    object_store_mb: int = Field(ge=64, le=1_048_576)
    cpus_per_replica: float = Field(ge=0, le=4096.0)
    gpus_per_replica: Literal["auto"] | Annotated[float, Field(ge=0, le=1024)]
    in_flight_per_replica: int = Field(ge=1, le=64)


class EngineConfig(SectionConfig):
    """Everything an engine needs besides the model path. Field names match the `[engine]` keys."""

    section: ClassVar[str] = "engine"

    name: EngineName
    model: str
    dtype: str
    max_model_len: int = Field(ge=16, le=16_777_216)
    gpu_memory_utilization: float = Field(gt=0, le=1)
    tensor_parallel_size: int = Field(ge=1, le=1024)
    enable_prefix_caching: StrictBool
    quantization: str
    structured_backend: StructuredBackend
    seed: int = Field(ge=0, le=4_294_967_295)
    enforce_eager: Literal["auto"] | StrictBool
    cpu_kvcache_space_gb: int = Field(ge=1, le=4096)
    multiprocessing: Literal["auto"] | StrictBool
    chat_template_kwargs: dict[str, Any]
    replicas: int = Field(ge=1, le=4096)
    ray_address: str
    round_chunk: int = Field(ge=1, le=1_000_000)
    distributed_executor_backend: Literal["auto", "mp", "ray"]
    openai: OpenAIConfig
    transformers: TransformersConfig
    ray: RayConfig

    @field_validator("name")
    @classmethod
    def _registered(cls, name: str) -> str:
        if name not in engine_names():
            raise ValueError(f"unknown engine '{name}' (one of: {', '.join(engine_names())})")
        return name


_NESTED = {"openai": set(OpenAIConfig.model_fields), "transformers": set(TransformersConfig.model_fields),
           "ray": set(RayConfig.model_fields)}


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
