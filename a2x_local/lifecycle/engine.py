"""The one engine of a lifecycle job, loaded on first need (a night without changes loads none)."""

from __future__ import annotations

from collections.abc import Callable

from a2x_local.llm import Engine, Usage


class LazyEngine:
    """The job's one engine, loaded on first need (a night without changes loads none) and closed at the end."""

    def __init__(self, load: Callable[[], Engine]) -> None:
        self._load = load
        self.engine: Engine | None = None
        self.before = Usage()

    def get(self) -> Engine:
        if self.engine is None:
            self.engine = self._load()
            self.before = self.engine.usage.snapshot()
        return self.engine

    def usage(self) -> Usage:
        return self.engine.usage.since(self.before) if self.engine is not None else Usage()

    def close(self) -> None:
        if self.engine is not None:
            self.engine.close()
