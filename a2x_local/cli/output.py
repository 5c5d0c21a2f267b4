"""What commands show: the two consoles, terminal-safe text, JSON for scripts, progress bars, the error lines.

Tables and text go to stdout (`console`); progress, notes, warnings and errors to stderr (`err_console`), so
`--json` output stays clean. Service and tree text passes through `shown` on its way to a terminal.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from a2x_local.cli.progress_lines import LineProgress, RoundLines, line_interval
from a2x_local.errors import A2XError
from a2x_local.llm import Result
from a2x_local.search import ProgressFactory
from a2x_local.text import one_line, show_bidi

T = TypeVar("T")
R = TypeVar("R")

# Into a pipe or a file, a long line stays one line (rich would break it at 80 columns, and grep would miss it);
# tables still fit the width (COLUMNS, else 80), and trees are printed with soft_wrap=False, since a soft-wrapped
# tree is cut at the width. In a terminal, rich wraps words for people.
console = Console(soft_wrap=not sys.stdout.isatty())
err_console = Console(stderr=True, soft_wrap=not sys.stderr.isatty())

def terminal_safe(text: str) -> str:
    """Text for a terminal: control characters but tabs and line breaks shown as visible escapes (\\x1b, \\r), never
    sent raw (printed raw they are escape sequences: ESC [2J), and bidi controls as ``<U+202E>`` (a right-to-left
    override U+202E before ``gnp.exe`` shows "toolexe.png").

    Ingest refuses them in service text; this covers what came in before, tree names and anything else shown."""
    return show_bidi(one_line(text, keep_breaks=True))


def shown(text: object) -> str:
    """Service or tree text inside rich output: terminal-safe, and its brackets never read as markup."""
    return escape(terminal_safe(str(text)))


def shown_inline(text: object) -> str:
    """`shown`, with tabs and line breaks written as ``\\t`` and ``\\n`` too: for text that must stay on its line (a
    label in a tree drawing, a name quoted in an error)."""
    return escape(show_bidi(one_line(text)))


def print_json(data: Any) -> None:
    """JSON on stdout, unwrapped, for scripts."""
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()


def print_error(exc: A2XError) -> None:
    """The `error:` line and its `hint:` on stderr, each one line with its control characters escaped: every command
    fails in the same two lines, and a name a message quotes (a path with a line break) cannot forge a third."""
    # soft_wrap: paths and ids in messages must stay whole for copy and paste (and for grep).
    err_console.print(f"[red]error:[/red] {shown_inline(exc.message)}", highlight=False, soft_wrap=True)
    if exc.hint:
        err_console.print(f"[dim]hint:[/dim] {shown_inline(exc.hint)}", highlight=False, soft_wrap=True)


def want_progress(json_output: bool) -> bool:
    """Progress bars only for people: not in --json mode and not when stderr is not a terminal."""
    return not json_output and err_console.is_terminal


@contextmanager
def progress_bars(enabled: bool) -> Iterator[ProgressFactory | None]:
    """A rich progress display on stderr handing out one bar per long step; None when output is for scripts."""
    if not enabled:
        yield None
        return
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err_console, transient=False) as progress:

        def bar(label: str, total: int) -> Callable[[int], None]:
            task = progress.add_task(label, total=total)
            return lambda n: progress.advance(task, n)

        yield bar


@contextmanager
def progress_reporter(json_output: bool, command: str) -> Iterator[ProgressFactory | None]:
    """Progress of a long command: bars for a person at a terminal; otherwise (stderr a pipe or a file, or --json)
    plain lines on stderr, a line per stage and at least one every ``$A2X_PROGRESS_EVERY_S`` (`progress_lines`);
    None when those are switched off."""
    if want_progress(json_output):
        with progress_bars(True) as bars:
            yield bars
        return
    every = line_interval()
    if every is None:
        yield None
        return
    with LineProgress(command, every) as lines:
        yield lines.bar


def in_chunks(work: Callable[[list[T]], list[R]], items: Sequence[T], progress: ProgressFactory | None, label: str,
              size: int) -> list[R]:
    """``work`` over ``items``, ``size`` at a time, each chunk reported to ``progress`` (a stage ``label``), so a
    file of queries says how far it got; at once when there is no progress to report."""
    if progress is None or not items:
        return work(list(items))
    advance = progress(label, len(items))
    done: list[R] = []
    for start in range(0, len(items), size):
        part = work(list(items[start:start + size]))
        done.extend(part)
        advance(len(part))
    return done


class RoundProgress:
    """One bar per engine round (its answers so far; a round is streamed, so its size shows when it ends), and a
    running line with rounds and tokens so far."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.rounds = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.overall = progress.add_task("starting", total=None)
        self.current: int | None = None

    def round_started(self, step: str, level: int, services: int) -> None:
        self.current = self.progress.add_task(f"level {level} · {step} · {services:,} services", total=None)

    def round_answered(self, step: str, results: Sequence[Result]) -> None:
        self.prompt_tokens += sum(r.prompt_tokens for r in results)
        self.completion_tokens += sum(r.completion_tokens for r in results)
        if self.current is not None:
            self.progress.advance(self.current, len(results))
        self._overall()

    def round_finished(self, step: str, requests: int, failed: int) -> None:
        self.rounds += 1
        if self.current is not None:
            self.progress.update(self.current, total=requests, completed=requests,
                                 description=f"{self.progress.tasks[self.current].description}"
                                             + (f" ({failed} failed)" if failed else ""))
        self._overall()

    def _overall(self) -> None:
        self.progress.update(self.overall, description=f"rounds {self.rounds} · prompt tokens"
                             f" {self.prompt_tokens:,} · completion tokens {self.completion_tokens:,}")


def with_round_progress(json_output: bool, work: Callable[[RoundProgress | RoundLines | None], Any],
                        command: str = "build") -> Any:
    """Run ``work(observer)`` (a build, an update, a nightly job) with a bar per model round for people, and with
    plain lines per round (and at least every `$A2X_PROGRESS_EVERY_S`) when stderr is not a terminal or for --json."""
    if not want_progress(json_output):
        every = line_interval()
        if every is None:
            return work(None)
        with LineProgress(command, every) as lines:
            return work(RoundLines(lines))
    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn())
    with Progress(*columns, console=err_console, transient=False) as progress:
        return work(RoundProgress(progress))
