"""`a2x-local build`: the LLM taxonomy build (the nightly job)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from a2x_local.cli.app import app
from a2x_local.cli.common import (
    DbOption,
    JsonOption,
    NoCacheOption,
    console,
    err_console,
    print_json,
    settings_for,
    want_progress,
    with_engine_options,
)
from a2x_local.llm import EngineOptions, Result, Usage, make_engine, with_answer_cache
from a2x_local.registry import RegistryConfig
from a2x_local.taxonomy import build_config, run_build, summary_rows

_T = "Build thresholds (default: the \\[build] table of the config)"


class _ProgressObserver:
    """One bar per engine round (its requests), and a running line with rounds and tokens so far."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.rounds = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.overall = progress.add_task("starting", total=None)
        self.current: int | None = None

    def round_started(self, step: str, level: int, requests: int, services: int) -> None:
        self.current = self.progress.add_task(f"level {level} · {step} · {services:,} services", total=requests)

    def round_finished(self, step: str, results: Sequence[Result]) -> None:
        self.rounds += 1
        self.prompt_tokens += sum(r.prompt_tokens for r in results)
        self.completion_tokens += sum(r.completion_tokens for r in results)
        failed = sum(1 for r in results if not r.ok)
        if self.current is not None:
            self.progress.update(self.current, completed=len(results),
                                 description=f"{self.progress.tasks[self.current].description}"
                                             + (f" ({failed} failed)" if failed else ""))
        self.progress.update(self.overall, description=f"rounds {self.rounds} · prompt tokens"
                             f" {self.prompt_tokens:,} · completion tokens {self.completion_tokens:,}")


@app.command("build")
@with_engine_options
def build_command(
    ctx: typer.Context,
    resume: Annotated[bool, typer.Option("--resume", help="Continue the latest unfinished build from its last "
                                         "checkpoint (same model and settings).")] = False,
    leaf_size: Annotated[int | None, typer.Option("--leaf-size", min=1, rich_help_panel=_T,
                                                  help="θ_leaf: split nodes with more services than this.")] = None,
    max_depth: Annotated[int | None, typer.Option("--max-depth", min=1, rich_help_panel=_T,
                                                  help="D: deepest level that is split.")] = None,
    max_children: Annotated[int | None, typer.Option("--max-children", min=2, max=99, rich_help_panel=_T,
                                                     help="N: most sub-categories per node.")] = None,
    keyword_threshold: Annotated[int | None, typer.Option(
        "--keyword-threshold", min=1, rich_help_panel=_T,
        help="θ_kw: nodes with more services design from keywords.")] = None,
    refine_passes: Annotated[int | None, typer.Option("--refine-passes", min=1, rich_help_panel=_T,
                                                      help="Assignment passes per node.")] = None,
    cross_domain: Annotated[bool | None, typer.Option("--cross-domain/--no-cross-domain", rich_help_panel=_T,
                                                      help="Run the cross-domain pass.", show_default=False)]
    = None,
    keyword_merge: Annotated[str | None, typer.Option("--keyword-merge", metavar="embedding|stem",
                                                      rich_help_panel=_T, help="Vocabulary merging.")] = None,
    no_cache: NoCacheOption = False,
    db: DbOption = None,
    json_output: JsonOption = False,
    engine_options: EngineOptions = None,  # type: ignore[assignment]  (filled by with_engine_options)
) -> None:
    """Build the category tree of the registry with a local model; it becomes active when it completes.

    Each step of a level is one batch for the engine.

    Progress is saved after every round: a killed build continues with --resume.

    Example: a2x-local build --model qwen2.5-32b --json
    """
    settings = settings_for(ctx, db)
    config = build_config(settings, leaf_max_services=leaf_size, max_depth=max_depth, max_children=max_children,
                          keyword_path_min_services=keyword_threshold, refine_passes=refine_passes,
                          cross_domain=cross_domain, keyword_merge=keyword_merge)
    label = engine_options.model or str(settings.section("engine")["model"])

    def load():
        return with_answer_cache(make_engine(settings, engine_options), settings, read=not no_cache)

    waits = {"lock_timeout_s": settings.lock_timeout_s,
             "checkpoint_wait_s": RegistryConfig.from_settings(settings).checkpoint_wait_s}
    if want_progress(json_output):
        columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn())
        with Progress(*columns, console=err_console, transient=False) as progress:
            outcome = run_build(settings.db_path, config, load, model=label, resume=resume,
                                observer=_ProgressObserver(progress), **waits)
    else:
        outcome = run_build(settings.db_path, config, load, model=label, resume=resume, **waits)
    if json_output:
        print_json({"build": outcome.build_id, "resumed": outcome.resumed, "active": outcome.active,
                    "notes": outcome.notes, "stats": outcome.report})
        return
    state = "now active" if outcome.active else "NOT activated (see the note)"
    table = Table(title=f"Tree {outcome.build_id} built{' (resumed)' if outcome.resumed else ''}; {state}")
    table.add_column("statistic")
    table.add_column("value", justify="right")
    for key, value in summary_rows(outcome.report):
        table.add_row(key, value)
    console.print(table)
    console.print(Usage.from_dict(outcome.report["usage"]).table(title="Model calls by call type"))
    for note in outcome.notes:
        err_console.print(f"[yellow]note:[/yellow] {note}")
