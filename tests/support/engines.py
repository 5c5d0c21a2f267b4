"""Answering a command's model calls with a test engine: every place that starts an engine goes through
`a2x_local.llm.make_engine`, so replacing it wherever it was imported reaches the CLI and the search methods alike."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

import pytest

import a2x_local.llm
from a2x_local.llm import Engine
from a2x_local.llm.types import Message, RawOutput, Request

_ORIGINAL = a2x_local.llm.make_engine


class SharedEngine(Engine):
    """The session engine (fixture `vllm_engine`) behind a wrapper whose close() leaves it running: commands and
    servers close the engine they were given, and the other tests still need it."""

    name = "shared-vllm"

    def __init__(self, inner: Engine) -> None:
        super().__init__()
        self.inner = inner

    @property
    def max_model_len(self) -> int | None:
        return self.inner.max_model_len

    def describe(self) -> dict:
        return self.inner.describe()

    def count_prompt_tokens(self, messages: Sequence[Message]) -> int:
        return self.inner.count_prompt_tokens(messages)

    def _generate(self, requests: Sequence[Request]) -> list[RawOutput]:
        return self.inner._generate(requests)

    def reset_prefix_cache(self) -> bool:
        return self.inner.reset_prefix_cache()


def patch_make_engine(monkeypatch: pytest.MonkeyPatch, factory: Callable[..., Engine]) -> list[Any]:
    """Route every `make_engine(settings, options)` call to ``factory(settings, options)``; returns the list of
    options it was called with (one entry per engine asked for)."""
    calls: list[Any] = []

    def fake(settings: Any, options: Any = None, **extra: Any) -> Engine:
        calls.append(options)
        return factory(settings, options)

    # Import the modules that hold `make_engine` first, so none binds the original after the patch.
    import a2x_local.cli.build_cmds
    import a2x_local.search.llm.methods  # noqa: F401

    # Only our own modules: other libraries' lazy modules import things on attribute access.
    ours = [module for name, module in list(sys.modules.items()) if name.startswith("a2x_local.") and module]
    for module in ours:
        if getattr(module, "make_engine", None) is _ORIGINAL:
            monkeypatch.setattr(module, "make_engine", fake)
    return calls
