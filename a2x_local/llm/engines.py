"""The engine kinds by name: `[engine] name` and `--engine` pick one, and `make_engine` starts it.

vllm, transformers and openai are this stage's own, declared in `_BUILT_IN` (as the search stage lists its own
methods), so importing this module registers nothing and a library caller's `make_engine` finds them without a
composition root. Anything else is added with `register_engine`: a plug-in (from the composition root,
`a2x_local.components`), or the test package's scripted engine, registered only while a test or benchmark asks
for it, so it is never a product default and no `--help` names it.
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


# The engines added at run time (plug-ins, test doubles), after the built-in ones of `_BUILT_IN` below.
_ADDED: dict[str, EngineKind] = {}


def register_engine(name: str, factory: EngineFactory, *, local_model: bool = True) -> None:
    """Make ``name`` a value of `[engine] name` and `--engine`; a name already taken is a programming error."""
    if name in _BUILT_IN or name in _ADDED:
        raise ValueError(f"an engine named '{name}' is already registered")
    _ADDED[name] = EngineKind(factory, local_model)


def unregister_engine(name: str) -> None:
    """Forget an engine registered with `register_engine` (the built-in ones stay)."""
    if name in _BUILT_IN:
        raise ValueError(f"'{name}' is a built-in engine")
    _ADDED.pop(name, None)


def engine_names() -> tuple[str, ...]:
    """Every engine name `make_engine` knows now, built-in ones first."""
    return (*_BUILT_IN, *_ADDED)


def engine_kind(name: str) -> EngineKind:
    kind = _BUILT_IN.get(name) or _ADDED.get(name)
    if kind is None:
        raise UserError(f"unknown engine '{name}'", hint=f"Use one of: {', '.join(engine_names())}.")
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


_BUILT_IN: dict[str, EngineKind] = {
    "vllm": EngineKind(_vllm),
    "transformers": EngineKind(_transformers),
    "openai": EngineKind(_openai, local_model=False),
}

# The engines that ship with a2x-local: what `--help` and the docs offer.
ENGINE_NAMES: tuple[str, ...] = tuple(_BUILT_IN)
