"""Answering a command's model calls with a test engine: every place that starts an engine goes through
`a2x_local.llm.make_engine`, so replacing it wherever it was imported reaches the CLI and the search methods alike."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import pytest

import a2x_local.llm
from a2x_local.llm import Engine

_ORIGINAL = a2x_local.llm.make_engine


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
