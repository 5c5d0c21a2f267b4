"""The engine kinds by name: `[engine] name` and `--engine` pick one, and `make_engine` starts it.

vllm, transformers and openai are registered below, the same way anything else is (`register_engine`): a plug-in,
or the test package's scripted engine, which is registered only while a test or benchmark asks for it, so it is
never a product default and no `--help` names it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from a2x_local.errors import UserError
from a2x_local.extras import require
from a2x_local.llm.base import Engine

if TYPE_CHECKING:
    from a2x_local.llm.config import EngineConfig
    from a2x_local.llm.models import ModelRef

EngineFactory = Callable[["ModelRef", "EngineConfig"], Engine]


@dataclass(frozen=True)
class EngineKind:
    """How to start one kind of engine: ``factory(model, settings)``; ``local_model``: the model is a folder on this
    machine, so it must exist and is checked before the engine starts (not so for a model a server holds)."""

    factory: EngineFactory
    local_model: bool = True


_KINDS: dict[str, EngineKind] = {}


def register_engine(name: str, factory: EngineFactory, *, local_model: bool = True) -> None:
    """Make ``name`` a value of `[engine] name` and `--engine`; a name already taken is a programming error."""
    if name in _KINDS:
        raise ValueError(f"an engine named '{name}' is already registered")
    _KINDS[name] = EngineKind(factory, local_model)


def unregister_engine(name: str) -> None:
    """Forget an engine registered with `register_engine` (the built-in ones stay)."""
    if name in ENGINE_NAMES:
        raise ValueError(f"'{name}' is a built-in engine")
    _KINDS.pop(name, None)


def engine_names() -> tuple[str, ...]:
    """Every engine name `make_engine` knows now, built-in ones first."""
    return tuple(_KINDS)


def engine_kind(name: str) -> EngineKind:
    kind = _KINDS.get(name)
    if kind is None:
        raise UserError(f"unknown engine '{name}'", hint=f"Use one of: {', '.join(_KINDS)}.")
    return kind


def _vllm(ref: ModelRef, config: EngineConfig) -> Engine:
    from a2x_local.llm.vllm_engine import VllmEngine

    return VllmEngine.shared(ref.path, config, model_label=ref.label)


def _transformers(ref: ModelRef, config: EngineConfig) -> Engine:
    from a2x_local.llm.transformers_engine import TransformersEngine

    return TransformersEngine(ref.path, config, model_label=ref.label)


def _openai(ref: ModelRef, config: EngineConfig) -> Engine:
    require("openai", feature="the openai engine")   # before the module, which imports httpx (the client's own)
    from a2x_local.llm.openai_engine import OpenAIEngine

    # The names the server may know the model by, most specific first.
    candidates = [ref.requested, ref.alias or "", ref.entry.source if ref.entry else "", str(ref.path), ref.path.name]
    return OpenAIEngine(config.openai, model=config.openai.served_model, candidates=candidates,
                        max_model_len=config.max_model_len)


register_engine("vllm", _vllm)
register_engine("transformers", _transformers)
register_engine("openai", _openai, local_model=False)

# The engines that ship with a2x-local: what `--help` and the docs offer.
ENGINE_NAMES: tuple[str, ...] = engine_names()
