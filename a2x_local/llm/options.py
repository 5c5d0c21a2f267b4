"""The engine choices a person makes per run (`--model`, `--engine`, ...), as one value every command shares.

`None` means "not given": the `[engine]` table and the model alias's settings apply. The CLI declares these flags
once and hands commands an `EngineOptions`; library callers (evaluation, a server) build one the same way.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from a2x_local.errors import UserError
from a2x_local.llm.config import EngineConfig, OpenAIConfig
from a2x_local.llm.constraints import STRUCTURED_BACKENDS
from a2x_local.llm.engines import ENGINE_NAMES, engine_kind, engine_names
from a2x_local.overrides import overrides_of
from a2x_local.settings import validation_problems

_ENGINE = overrides_of(EngineConfig)
_OPENAI = overrides_of(OpenAIConfig)


class EngineOptions(BaseModel):
    """Which model, which engine, and the engine settings worth changing per run.

    Each field is an `[engine]` key (or `[engine.openai]` base_url) made optional: its type and bounds are the
    table's (llm/config.py), its description is the help of its command-line flag (cli/options.py generates the
    flags from these fields), ``metavar`` what the flag's value looks like."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: _ENGINE.model = Field(None, json_schema_extra={"metavar": "ALIAS|PATH"}, description=(
        "Model alias (see `a2x-local models list`) or a model folder; default: `model` in [engine]."))
    engine: _ENGINE.name = Field(None, json_schema_extra={"metavar": "|".join(ENGINE_NAMES)}, description=(
        "vllm (offline batching), transformers (no vLLM needed) or openai (a server at --base-url); "
        "default: `name` in [engine]."))
    base_url: _OPENAI.base_url = Field(None, json_schema_extra={"metavar": "URL"}, description=(
        "OpenAI-compatible server for --engine openai, e.g. http://127.0.0.1:8000/v1."))
    max_model_len: _ENGINE.max_model_len = Field(None, description=(
        "Context window in tokens (prompt + answer); smaller needs less memory."))
    dtype: _ENGINE.dtype = Field(None, json_schema_extra={"metavar": "auto|bfloat16|float16|float32"}, description=(
        "Number format of the weights (float32 on CPUs without bfloat16 support)."))
    gpu_memory_utilization: _ENGINE.gpu_memory_utilization = Field(None, description=(
        "Share of each GPU's memory vLLM may use."))
    tensor_parallel_size: _ENGINE.tensor_parallel_size = Field(None, description=(
        "Split the model across this many GPUs."))
    quantization: _ENGINE.quantization = Field(None, json_schema_extra={"metavar": "METHOD"}, description=(
        "vLLM quantization method (awq, gptq, fp8, ...)."))
    structured_backend: _ENGINE.structured_backend = Field(None, description=(
        "Structured-output backend; guidance (default) is the one measured to produce valid multi-item answers."))
    replicas: _ENGINE.replicas = Field(None, description=(
        "Copies of the model that share each round, one per GPU or tensor-parallel group, on Ray "
        "(the [distributed] extra); default: `replicas` in [engine] (1)."))
    ray_address: _ENGINE.ray_address = Field(None, json_schema_extra={"metavar": "ADDRESS"}, description=(
        "Ray cluster the replicas run on (ray://head:10001, or auto on a cluster node); default: a private "
        "Ray instance on this machine."))

    @field_validator("engine")
    @classmethod
    def _registered(cls, engine: Any) -> Any:
        """A registered engine's name (a subclass may also hold a running engine, which passes)."""
        if isinstance(engine, str) and engine not in engine_names():
            raise ValueError(f"unknown engine '{engine}' (one of: {', '.join(engine_names())})")
        return engine

    @classmethod
    def of(cls, **values: Any) -> EngineOptions:
        """Checked options from flag values; a bad name or number is a `UserError` naming it."""
        engine, backend = values.get("engine"), values.get("structured_backend")
        if engine is not None:
            engine_kind(engine)  # an unknown name is a UserError listing the known ones
        if backend is not None and backend not in STRUCTURED_BACKENDS:
            raise UserError(f"unknown structured-output backend '{backend}'",
                            hint=f"Use one of: {', '.join(STRUCTURED_BACKENDS)}.")
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            raise UserError(f"engine options: {validation_problems(exc)}",
                            hint="see `a2x-local COMMAND --help` for each flag's allowed values") from exc

    @property
    def engine_name(self) -> str | None:
        """The engine asked for: a server URL alone means the openai engine."""
        if self.engine is None and self.base_url is not None:
            return "openai"
        return self.engine

    def table_overrides(self) -> dict[str, Any]:
        """The given values as `[engine]` keys (flat; `base_url` belongs to `[engine.openai]`)."""
        return self.model_dump(exclude_none=True, include=set(ENGINE_OPTION_NAMES) - {"model", "engine"})


ENGINE_OPTION_NAMES: tuple[str, ...] = tuple(EngineOptions.model_fields)
