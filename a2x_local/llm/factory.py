"""`make_engine`: from settings, a model alias or path, and flags to a ready engine.

Precedence, lowest first: the `[engine]` table (configs/default.toml, then user config files), the model alias's
recommendations (configs/models.toml), then keyword overrides (command-line flags). ``None`` overrides are ignored.
"""

from __future__ import annotations

from typing import Any

from a2x_local.errors import UserError
from a2x_local.llm.base import Engine
from a2x_local.llm.config import EngineConfig, engine_config, nest_overrides
from a2x_local.llm.model_check import ModelCheck, check_model
from a2x_local.llm.models import ModelRef, resolve_model
from a2x_local.settings import Settings, deep_merge


def engine_settings(settings: Settings, model: str | None = None, engine: str | None = None, *,
                    must_exist: bool | None = None, **overrides: Any) -> tuple[ModelRef, EngineConfig]:
    """The resolved model and the merged, validated engine settings (no model is loaded).

    ``must_exist``: whether a path that is not an alias must exist (default: unless the engine is openai).
    """
    base = settings.section("engine")
    flags = nest_overrides({**overrides, "name": engine})
    name = flags.get("name") or base.get("name", "vllm")
    target = model or base.get("model", "")
    if must_exist is None:
        must_exist = name != "openai"
    ref = resolve_model(settings, target, must_exist=must_exist)
    merged = deep_merge(deep_merge(base, ref.settings), flags)
    merged["model"] = ref.label
    where = f"[engine] + model '{ref.label}' + flags"
    return ref, engine_config(merged, where=where)


def make_engine(settings: Settings, model: str | None = None, engine: str | None = None,
                **overrides: Any) -> Engine:
    """A ready engine. ``model``: an alias from configs/models.toml or a folder (default: `[engine] model`).

    ``engine``: "vllm" | "transformers" | "openai" (default: `[engine] name`). ``overrides``: any `[engine]` key
    (``max_model_len=4096``, ``dtype="float32"``) or `[engine.openai]` / `[engine.transformers]` key
    (``base_url=...``, ``batch_size=...``). The vllm engine is shared: asking again for the same model and settings
    returns the running one. Missing or incomplete model folders raise `UserError` before anything loads.
    """
    ref, config = engine_settings(settings, model, engine, **overrides)
    if config.name == "openai":
        from a2x_local.llm.openai_engine import OpenAIEngine

        candidates = [ref.requested, ref.alias or "", ref.entry.source if ref.entry else "", str(ref.path),
                      ref.path.name]
        return OpenAIEngine(config.openai, model=config.openai.served_model, candidates=candidates)
    _preflight(ref, config)
    if config.name == "transformers":
        from a2x_local.llm.transformers_engine import TransformersEngine

        return TransformersEngine(ref.path, config, model_label=ref.label)
    from a2x_local.llm.vllm_engine import VllmEngine

    return VllmEngine.shared(ref.path, config, model_label=ref.label)


def check_ref(ref: ModelRef, config: EngineConfig, *, load_tokenizer: bool = True) -> ModelCheck:
    """`models check` for a resolved model under the engine settings it would run with."""
    return check_model(ref.path, target=ref.requested, alias=ref.alias, entry=ref.entry, dtype=config.dtype,
                       max_model_len=config.max_model_len, tensor_parallel_size=config.tensor_parallel_size,
                       load_tokenizer=load_tokenizer)


def _preflight(ref: ModelRef, config: EngineConfig) -> None:
    """Fail in a second with the list of what is missing, rather than minutes into an engine start."""
    check = check_ref(ref, config, load_tokenizer=False)
    if not check.ok:
        raise UserError(f"model '{ref.label}' at {ref.path} is not usable: " + " ".join(check.problems),
                        hint=f"Run `a2x-local models check {ref.requested}` for details; see models/README.md.")
