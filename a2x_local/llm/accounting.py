"""Counting every model call: calls, tokens, failures and seconds per call type."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from rich.table import Table

from a2x_local.costs import Cost


@dataclass
class CallStats(Cost):
    """Totals for one call type: the `Cost` (``calls`` counts every attempt sent to a model, retries included) and
    what went wrong or was saved: ``cached`` counts answers read from the answer cache instead (never sent), and
    the ``cached_*`` tokens what they saved; ``prefix_cached_tokens`` the prompt tokens the engine served from its
    prefix cache (engines that report it); ``truncated`` the attempts whose answer was cut off at its token budget
    (a model that writes on and on: each is retried once with a larger budget, then counted as failed)."""

    failures: int = 0
    retries: int = 0
    truncated: int = 0
    seconds: float = 0.0
    cached: int = 0
    cached_prompt_tokens: int = 0
    cached_completion_tokens: int = 0
    prefix_cached_tokens: int = 0

    def add(self, other: CallStats) -> None:
        for item in fields(self):
            setattr(self, item.name, getattr(self, item.name) + getattr(other, item.name))

    def __sub__(self, other: CallStats) -> CallStats:
        return CallStats(**{item.name: getattr(self, item.name) - getattr(other, item.name) for item in fields(self)})


@dataclass
class Usage:
    """Per-label call statistics plus the number of sequential engine rounds (``generate`` calls)."""

    by_label: dict[str, CallStats] = field(default_factory=dict)
    rounds: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    # While a streamed round runs (`one_round`), the deepest attempt seen: its chunks count as one round (plus one
    # for the retries, when any chunk retried), as the same requests sent in one call would.
    _streamed: int | None = field(default=None, repr=False, compare=False)

    def record(self, label: str, **counts: Any) -> None:
        """Add ``counts`` (`CallStats` fields by name) to the label's statistics."""
        with self._lock:
            self.by_label.setdefault(label, CallStats()).add(CallStats(**counts))

    def count_round(self, attempt: int = 1) -> None:
        with self._lock:
            if self._streamed is None:
                self.rounds += 1
            else:
                self._streamed = max(self._streamed, attempt)

    @contextmanager
    def one_round(self) -> Iterator[None]:
        """Count every backend call inside the block as one round (first attempts) plus one for retries: a round
        streamed in chunks costs the rounds of the same round sent whole. Nested blocks join the outer one."""
        with self._lock:
            outer = self._streamed is not None
            if not outer:
                self._streamed = 0
        try:
            yield
        finally:
            if not outer:
                with self._lock:
                    self.rounds += self._streamed or 0
                    self._streamed = None

    def total(self) -> CallStats:
        total = CallStats()
        for stats in self.by_label.values():
            total.add(stats)
        return total

    def merge(self, other: Usage) -> None:
        for label, stats in other.by_label.items():
            self.record(label, **asdict(stats))
        with self._lock:
            self.rounds += other.rounds

    def snapshot(self) -> Usage:
        copy = Usage()
        copy.merge(self)
        return copy

    def since(self, earlier: Usage) -> Usage:
        """What was used after ``earlier`` (a snapshot of this same object) was taken; idle labels are left out."""
        delta = Usage(rounds=self.rounds - earlier.rounds)
        for label, stats in self.by_label.items():
            change = stats - earlier.by_label.get(label, CallStats())
            if change != CallStats():
                delta.by_label[label] = change
        return delta

    def to_dict(self) -> dict[str, Any]:
        total = self.total()
        return {
            "rounds": self.rounds,
            "by_call_type": {label: asdict(stats) for label, stats in sorted(self.by_label.items())},
            "total": asdict(total) | {"total_tokens": total.total_tokens},
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Usage:
        usage = cls(rounds=int(data.get("rounds", 0)))
        for label, stats in data.get("by_call_type", {}).items():
            usage.by_label[label] = CallStats(**stats)
        return usage

    def table(self, title: str = "Model calls") -> Table:
        """A rich table, one row per call type and a total row."""
        table = Table(title=title)
        table.add_column("call type", no_wrap=True, min_width=12)
        # The cache columns only when the cache answered something, so uncached runs read as before.
        cached = self.total().cached > 0
        # Likewise the answers cut off at their budget: a column only when there were any.
        truncated = self.total().truncated > 0
        columns = ("calls", "prompt", "completion", "failed", "retries", *(("cut off",) if truncated else ()),
                   "seconds")
        for column in columns + (("from cache", "prompt saved") if cached else ()):
            table.add_column(column, justify="right", no_wrap=True)
        rows = [*sorted(self.by_label.items()), ("total", self.total())]
        for label, stats in rows:
            cells = [f"{stats.calls:,}", f"{stats.prompt_tokens:,}", f"{stats.completion_tokens:,}",
                     f"{stats.failures:,}", f"{stats.retries:,}",
                     *((f"{stats.truncated:,}",) if truncated else ()), f"{stats.seconds:.1f}"]
            if cached:
                cells += [f"{stats.cached:,}", f"{stats.cached_prompt_tokens:,}"]
            table.add_row(label, *cells, style="bold" if label == "total" else None)
        return table
