"""The engine choices a person makes per run (`--model`, `--engine`, ...), as one value every command shares.

`None` means "not given": the `[engine]` table and the model alias's settings apply. The CLI declares these flags
once and hands commands an `EngineOptions`; library callers (evaluation, a server) build one the same way.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from a2x_local.errors import UserError
from a2x_local.llm.constraints import STRUCTURED_BACKENDS
from a2x_local.llm.engines import engine_kind
from a2x_local.settings import validation_problems


class EngineOptions(BaseModel):
    """Which model, which engine, and the engine settings worth changing per run."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str | None = Field(None, description="model alias or folder (default: `model` in [engine])")
    engine: str | None = Field(None, description="vllm | transformers | openai, or a registered engine (default: "
                                                 "`name` in [engine])")
    base_url: str | None = Field(None, description="OpenAI-compatible server (implies engine openai)")
    max_model_len: int | None = Field(None, ge=16, description="context window in tokens")
    dtype: str | None = Field(None, description="weights' number format")
    gpu_memory_utilization: float | None = Field(None, gt=0, le=1, description="share of each GPU vLLM may use")
    tensor_parallel_size: int | None = Field(None, ge=1, description="GPUs the model is split across")
    quantization: str | None = Field(None, description="vLLM quantization method")
    structured_backend: str | None = Field(None, description="structured-output backend")

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
        return self.model_dump(exclude_none=True, exclude={"model", "engine"})


ENGINE_OPTION_NAMES: tuple[str, ...] = tuple(EngineOptions.model_fields)
