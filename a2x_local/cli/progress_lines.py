"""Progress as plain lines on stderr, for when nobody watches a terminal (cron, CI, a nightly job's log, a pipe).

A bar redrawn in place means nothing in a log file, and a long command that prints nothing for minutes looks hung.
So when stderr is not a terminal (or the command runs with --json), long commands write a line when a stage starts,
a line when it ends, and in between at least one line every `A2X_PROGRESS_EVERY_S` seconds (30 by default) with its
counts, its rate and the time so far, e.g. ``build: level 1 · keywords · 333 services: 120 answers, 4.1/s, 29 s``;
with no stage under way the command says it is still working. ``A2X_PROGRESS_EVERY_S=off`` silences the lines.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from a2x_local.errors import UserError

EVERY_VARIABLE = "A2X_PROGRESS_EVERY_S"
DEFAULT_EVERY_S = 30.0


def line_interval(environ: dict[str, str] | None = None) -> float | None:
    """Seconds between progress lines (``$A2X_PROGRESS_EVERY_S``, 30 by default; 0 writes a line on every
    report); None when they are switched off ("off")."""
    raw = (os.environ if environ is None else environ).get(EVERY_VARIABLE, "").strip()
    if not raw:
        return DEFAULT_EVERY_S
    if raw.lower() in ("off", "none", "no"):
        return None
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 86400:
        raise UserError(f"${EVERY_VARIABLE} is '{raw}': not a number of seconds",
                        hint="give seconds between progress lines (0 to 86400), or 'off'")
    return value


@dataclass
class _Stage:
    label: str
    total: int | None
    started: float = field(default_factory=time.monotonic)
    done: int = 0
    unit: str = ""
    last_line: float = field(default_factory=time.monotonic)
    finished: bool = False

    def describe(self, now: float) -> str:
        seconds = now - self.started
        if self.total == 1:     # one step (a BM25 index): only its time says anything
            return f"{self.label}: {seconds:.0f} s"
        counts = f"{self.done:,}/{self.total:,}" if self.total else f"{self.done:,}"
        unit = f" {self.unit}" if self.unit else ""
        rate = f", {self.done / seconds:.1f}/s" if seconds >= 1 and self.done else ""
        return f"{self.label}: {counts}{unit}{rate}, {seconds:.0f} s"


class LineProgress:
    """Plain progress lines for one command; hands out one stage per long step, as the bars do.

    Use as a context manager: a background thread keeps the lines coming while a stage (or the work between
    stages) reports nothing, and leaving it writes the last state of any stage not yet finished."""

    def __init__(self, command: str, every_s: float, stream: TextIO | None = None) -> None:
        self.command = command
        self.every_s = every_s
        self.stream = stream
        self.started = time.monotonic()
        self._last_line = self.started
        self._stages: list[_Stage] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    def __enter__(self) -> LineProgress:
        self._ticker = threading.Thread(target=self._tick, name="a2x-progress-lines", daemon=True)
        self._ticker.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join(timeout=5)
        now = time.monotonic()
        with self._lock:
            for stage in self._stages:
                if not stage.finished and stage.done:
                    self._write(f"{stage.describe(now)} (stopped)")

    # --- stages --------------------------------------------------------------------------------------------------

    def stage(self, label: str, total: int | None, unit: str = "") -> _Stage:
        with self._lock:
            stage = _Stage(label, total, unit=unit)
            self._stages.append(stage)
            counted = f" ({total:,}{' ' + unit if unit else ''})" if total and total > 1 else ""
            self._write(f"{label}: started{counted}")
            return stage

    def advance(self, stage: _Stage, n: int) -> None:
        now = time.monotonic()
        with self._lock:
            stage.done += n
            if stage.total is not None and stage.done >= stage.total and not stage.finished:
                stage.finished = True
                self._write(f"{stage.describe(now)}, done")
            elif now - stage.last_line >= self.every_s:
                stage.last_line = now
                self._write(stage.describe(now))

    def finish(self, stage: _Stage, note: str = "") -> None:
        with self._lock:
            if not stage.finished:
                stage.finished = True
                self._write(f"{stage.describe(time.monotonic())}, done{note}")

    def note(self, text: str) -> None:
        with self._lock:
            self._write(text)

    def bar(self, label: str, total: int) -> Callable[[int], None]:
        """A `ProgressFactory` as the bars give: ``bar(label, total)`` -> ``advance(n)``."""
        stage = self.stage(label, total)
        return lambda n: self.advance(stage, n)

    # --- output --------------------------------------------------------------------------------------------------

    def _write(self, text: str) -> None:
        """One line; the caller holds the lock. Labels are the project's own words (stages, methods, models)."""
        self._last_line = time.monotonic()
        stream = self.stream or sys.stderr
        stream.write(f"{self.command}: {text}\n")
        stream.flush()

    def _tick(self) -> None:
        # Half the interval (at least 50 ms): a line is then at most 1.5 intervals after the previous one.
        while not self._stop.wait(max(self.every_s / 2, 0.05)):
            now = time.monotonic()
            with self._lock:
                active = [stage for stage in self._stages if not stage.finished]
                for stage in active:
                    if now - stage.last_line >= self.every_s:
                        stage.last_line = now
                        self._write(stage.describe(now))
                if not active and now - self._last_line >= self.every_s:
                    self._write(f"working, {now - self.started:.0f} s")


class RoundLines:
    """The build's observer (as `RoundProgress` for the bars): a line per engine round started and finished, and
    between them the answers so far, every interval."""

    def __init__(self, lines: LineProgress) -> None:
        self.lines = lines
        self.rounds = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.current: _Stage | None = None

    def round_started(self, step: str, level: int, services: int) -> None:
        self.current = self.lines.stage(f"level {level} · {step} · {services:,} services", None, unit="answers")

    def round_answered(self, step: str, results: Sequence[Any]) -> None:
        self.prompt_tokens += sum(r.prompt_tokens for r in results)
        self.completion_tokens += sum(r.completion_tokens for r in results)
        if self.current is not None:
            self.lines.advance(self.current, len(results))

    def round_finished(self, step: str, requests: int, failed: int) -> None:
        self.rounds += 1
        if self.current is not None:
            self.current.total = requests
            self.lines.finish(self.current, f" ({failed} failed)" if failed else "")
            self.current = None
        self.lines.note(f"rounds {self.rounds} · prompt tokens {self.prompt_tokens:,} · completion tokens"
                        f" {self.completion_tokens:,}")
