"""The model/engine flags shared by every command that runs a model, and one call that turns them into an engine.

Use in a command::

    from a2x_local.cli.engine_options import (BaseUrlOption, DtypeOption, EngineOption, GpuMemoryOption,
        MaxModelLenOption, ModelOption, QuantizationOption, StructuredBackendOption, TensorParallelOption,
        engine_from_options)

    @app.command("build")
    def build_command(ctx: typer.Context, model: ModelOption = None, engine: EngineOption = None,
                      base_url: BaseUrlOption = None, max_model_len: MaxModelLenOption = None,
                      dtype: DtypeOption = None, gpu_memory_utilization: GpuMemoryOption = None,
                      tensor_parallel_size: TensorParallelOption = None, quantization: QuantizationOption = None,
                      structured_backend: StructuredBackendOption = None, db: DbOption = None) -> None:
        settings = settings_for(ctx, db)
        with engine_from_options(settings, model=model, engine=engine, base_url=base_url,
                                 max_model_len=max_model_len, dtype=dtype,
                                 gpu_memory_utilization=gpu_memory_utilization,
                                 tensor_parallel_size=tensor_parallel_size, quantization=quantization,
                                 structured_backend=structured_backend) as llm:
            ...

Every option defaults to None, meaning "not given": the alias's and `[engine]`'s settings apply. A command may
declare only the options it needs; `engine_from_options` takes the rest as None.
"""

from __future__ import annotations

from typing import Annotated

import typer

from a2x_local.errors import UserError
from a2x_local.llm.base import Engine
from a2x_local.llm.config import ENGINE_NAMES
from a2x_local.llm.constraints import STRUCTURED_BACKENDS
from a2x_local.settings import Settings

_PANEL = "Model and engine"

ModelOption = Annotated[str | None, typer.Option(
    "--model", "-m", metavar="ALIAS|PATH", rich_help_panel=_PANEL, show_default=False,
    help="Model alias from configs/models.toml (see `a2x-local models list`) or a model folder; "
         "default: `model` in \\[engine].")]
EngineOption = Annotated[str | None, typer.Option(
    "--engine", metavar="|".join(ENGINE_NAMES), rich_help_panel=_PANEL, show_default=False,
    help="vllm (offline batching), transformers (no vLLM needed) or openai (a server at --base-url); "
         "default: `name` in \\[engine].")]
BaseUrlOption = Annotated[str | None, typer.Option(
    "--base-url", metavar="URL", rich_help_panel=_PANEL, show_default=False,
    help="OpenAI-compatible server for --engine openai, e.g. http://127.0.0.1:8000/v1.")]
MaxModelLenOption = Annotated[int | None, typer.Option(
    "--max-model-len", min=16, rich_help_panel=_PANEL, show_default=False,
    help="Context window in tokens (prompt + answer); smaller needs less memory.")]
DtypeOption = Annotated[str | None, typer.Option(
    "--dtype", metavar="auto|bfloat16|float16|float32", rich_help_panel=_PANEL, show_default=False,
    help="Number format of the weights (float32 on CPUs without bfloat16 support).")]
GpuMemoryOption = Annotated[float | None, typer.Option(
    "--gpu-memory-utilization", min=0.05, max=1.0, rich_help_panel=_PANEL, show_default=False,
    help="Share of each GPU's memory vLLM may use.")]
TensorParallelOption = Annotated[int | None, typer.Option(
    "--tensor-parallel-size", min=1, rich_help_panel=_PANEL, show_default=False,
    help="Split the model across this many GPUs.")]
QuantizationOption = Annotated[str | None, typer.Option(
    "--quantization", metavar="METHOD", rich_help_panel=_PANEL, show_default=False,
    help="vLLM quantization method (awq, gptq, fp8, ...).")]
StructuredBackendOption = Annotated[str | None, typer.Option(
    "--structured-backend", metavar="|".join(STRUCTURED_BACKENDS), rich_help_panel=_PANEL, show_default=False,
    help="Structured-output backend; guidance (default) is the one measured to produce valid multi-item answers.")]


def engine_from_options(settings: Settings, *, model: str | None = None, engine: str | None = None,
                        base_url: str | None = None, max_model_len: int | None = None, dtype: str | None = None,
                        gpu_memory_utilization: float | None = None, tensor_parallel_size: int | None = None,
                        quantization: str | None = None, structured_backend: str | None = None) -> Engine:
    """A ready engine from the flags above (None = not given). Raises `UserError` for bad values or models.

    The engine is a context manager: ``with engine_from_options(...) as llm:`` releases it at the end.
    """
    if engine is not None and engine not in ENGINE_NAMES:
        raise UserError(f"unknown engine '{engine}'", hint=f"Use one of: {', '.join(ENGINE_NAMES)}.")
    if structured_backend is not None and structured_backend not in STRUCTURED_BACKENDS:
        raise UserError(f"unknown structured-output backend '{structured_backend}'",
                        hint=f"Use one of: {', '.join(STRUCTURED_BACKENDS)}.")
    if base_url is not None and engine is None:
        engine = "openai"
    from a2x_local.llm.factory import make_engine

    return make_engine(settings, model, engine, base_url=base_url, max_model_len=max_model_len, dtype=dtype,
                       gpu_memory_utilization=gpu_memory_utilization, tensor_parallel_size=tensor_parallel_size,
                       quantization=quantization, structured_backend=structured_backend)
