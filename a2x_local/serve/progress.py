"""Progress of long calls and of the server's own start: what a client is told while it waits.

- `Loading` is what the server is still preparing (the registry snapshot, the model, a method's index), with
  counts where the work has them; /healthz shows it and "loading" answers name it.
- `Activity` is one request's current stage ("waiting for the model", "searching with a2x").
- `with_progress` runs a call and, while it takes longer than a second, reports every second through the
  client's channel: an MCP progress notification (the request's progress token), a line of the page's NDJSON
  stream. Progress is the seconds waited so far (it must only grow); the message says what is being waited for.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")
# report(progress, total, message): a client's progress channel.
Report = Callable[[float, float | None, str], Awaitable[None]]
REPORT_EVERY_S = 1.0


@dataclass
class _Task:
    what: str
    started: float = field(default_factory=time.monotonic)
    done: int = 0
    total: int | None = None
    label: str = ""

    def describe(self) -> str:
        seconds = time.monotonic() - self.started
        counts = f": {self.done:,} of {self.total:,}" if self.total else ""
        label = f" ({self.label})" if self.label and self.label != self.what else ""
        return f"{self.what}{label}{counts}, {seconds:.0f} s so far"

    def to_dict(self) -> dict[str, Any]:
        return {"what": self.what, "label": self.label or None, "done": self.done, "total": self.total,
                "seconds": round(time.monotonic() - self.started, 1)}


class Loading:
    """What is being prepared now, keyed by a name ("registry", "model", "method:hybrid"); thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tasks: dict[str, _Task] = {}

    def begin(self, key: str, what: str) -> None:
        with self._lock:
            self._tasks[key] = _Task(what)

    def end(self, key: str) -> None:
        with self._lock:
            self._tasks.pop(key, None)

    def progress_factory(self, key: str, building: str | None = None) -> Callable[[str, int], Callable[[int], None]]:
        """A search-stage `ProgressFactory` that counts into ``key`` (an index build's progress). A method reports
        progress only while it builds something; from the first report on, ``building`` (when given) replaces what
        the entry says: a method found with its indexes on disk is "loading", one that embeds is "indexing"."""

        def factory(label: str, total: int) -> Callable[[int], None]:
            with self._lock:
                task = self._tasks.get(key)
                if task is not None:
                    task.label, task.total, task.done = label, total, 0
                    task.what = building or task.what

            def advance(n: int) -> None:
                with self._lock:
                    found = self._tasks.get(key)
                    if found is not None:
                        found.done += n

            return advance

        return factory

    def describe(self, key: str) -> str | None:
        with self._lock:
            task = self._tasks.get(key)
            return task.describe() if task is not None else None

    def to_dict(self) -> dict[str, Any]:
        with self._lock:
            return {key: task.to_dict() for key, task in self._tasks.items()}

    def __bool__(self) -> bool:
        with self._lock:
            return bool(self._tasks)


@dataclass
class Activity:
    """One request's current stage, read by its progress reports."""

    stage: str = "starting"
    detail: Callable[[], str | None] | None = None

    def set(self, stage: str, detail: Callable[[], str | None] | None = None) -> None:
        self.stage, self.detail = stage, detail

    def describe(self) -> str:
        """The detail when there is one (it names what it is: "loading the hybrid method, 3 s so far"), else the
        stage."""
        extra = self.detail() if self.detail is not None else None
        return extra or self.stage


async def with_progress(work: Awaitable[T], report: Report | None, activity: Activity) -> T:
    """``work``'s result; while it runs past a second, ``report`` hears every second what it is waiting for."""
    if report is None:
        return await work
    task = asyncio.ensure_future(work)
    started = time.monotonic()
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=REPORT_EVERY_S)
            if done:
                return task.result()
            try:
                await report(round(time.monotonic() - started, 1), None, activity.describe())
            except Exception:  # a client that went away must not fail the work it asked for
                report = None
                return await task
    finally:
        if not task.done():
            task.cancel()
