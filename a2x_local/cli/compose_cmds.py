"""`a2x-local compose`: plan a request (or a file of them) as steps, one service each, with dependencies."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.tree import Tree as RichTree

from a2x_local.cli.options import (
    DbOption,
    JsonOption,
    MethodChoice,
    config_flag,
    query_texts,
    settings_for,
    with_engine_options,
    with_step_method_options,
)
from a2x_local.cli.output import (
    console,
    in_chunks,
    print_json,
    progress_bars,
    progress_reporter,
    shown_inline,
    want_progress,
)
from a2x_local.compose import DECOMPOSERS, Plan, open_composer
from a2x_local.errors import UserError
from a2x_local.evaluation import EvaluationConfig
from a2x_local.llm import EngineOptions
from a2x_local.settings import table_models

# This module's commands; the composition root (cli/app.py) adds them to the application.
commands = typer.Typer()

_COMPOSE = table_models()["compose"]   # --k and --alpha take its fields' bounds


@commands.command("compose")
@with_step_method_options
@with_engine_options
def compose_command(
    ctx: typer.Context,
    request: Annotated[str | None, typer.Argument(help="What the agent must get done, in words.",
                                                  show_default=False)] = None,
    queries: Annotated[Path | None, typer.Option("--queries", "-q", help="Plan every request of a file instead "
                                                 "(.txt one per line, or JSON/JSONL with a 'query' field).")] = None,
    k: config_flag(_COMPOSE, "candidates", "--k", "-k", help="Candidates kept per step: the choice and its "
                   "alternatives (default: \\[compose] candidates).", show_default=False) = None,
    sad: Annotated[bool | None, typer.Option("--sad/--no-sad", help="Skill-aware re-decomposition: show the model "
                                             "the services a first search found, then decompose again (default: "
                                             "\\[compose] sad; model decomposer only).", show_default=False)] = None,
    steps: Annotated[Path | None, typer.Option("--steps", help="Take the steps from this file instead of "
                                               "decomposing (see docs/compose.md).")] = None,
    decomposer: Annotated[str | None, typer.Option("--decomposer", metavar="|".join(DECOMPOSERS),
                                                   help="Who splits the request: a model, the rules, or auto "
                                                   "(the model when one is installed; default: \\[compose] "
                                                   "decomposer).", show_default=False)] = None,
    alpha: config_flag(_COMPOSE, "alpha", "--alpha", help="Weight of similarity against compatibility when "
                       "choosing a step's service (default: \\[compose] alpha).", show_default=False) = None,
    rerank: Annotated[bool | None, typer.Option("--rerank/--no-rerank", help="Let the model re-order each step's "
                                                "candidates (one constrained call for all steps; needs --model; "
                                                "default: \\[compose] rerank).", show_default=False)] = None,
    trace: Annotated[bool, typer.Option("--trace", help="Also print how each candidate scored and what SAD did "
                                        "(--json always includes it).")] = False,
    db: DbOption = None,
    json_output: JsonOption = False,
    method: MethodChoice = None,  # type: ignore[assignment]  (filled by with_step_method_options)
    engine_options: EngineOptions = None,  # type: ignore[assignment]  (filled by with_engine_options)
) -> None:
    """Plan a request: steps, one service for each, alternatives, dependencies and parallel groups.

    The request is split into steps (by a model, or by rules without one), every step is searched with --method
    (default: \\[compose] step_method), and each step's service is chosen by similarity and compatibility with the
    others.

    Example: a2x-local compose "find popular movies, then tell me where to stream them" --k 3
    """
    if decomposer is not None and decomposer not in DECOMPOSERS:
        raise typer.BadParameter(f"choose one of: {', '.join(DECOMPOSERS)}", param_hint="--decomposer")
    if steps is not None and decomposer is not None:
        raise typer.BadParameter("--steps gives the steps; leave out --decomposer", param_hint="--steps")
    texts = query_texts(request, queries, "REQUEST")
    settings = settings_for(ctx, db)
    # A file of requests is long work: piped or with --json it writes progress lines, as index and eval do.
    reporter = progress_reporter(json_output, "compose") if queries else progress_bars(want_progress(json_output))
    with reporter as progress:
        composer = open_composer(settings, engine_options=engine_options, method_options=method.options,
                                 steps=steps, progress=progress, decomposer=decomposer, alpha=alpha,
                                 step_method=method.name, rerank=rerank)
        with composer:
            if sad and composer.model is None:
                raise UserError(f"--sad needs a model decomposer, and this plan's is {composer.label}",
                                hint="give --model ALIAS (see `a2x-local models list`), or leave out --sad")
            plans = in_chunks(lambda part: composer.plan(part, k=k, sad=sad, mode=method.mode, rerank=rerank),
                              texts, progress if queries else None, f"planning {len(texts):,} requests",
                              EvaluationConfig.from_settings(settings).batch_size)
            usage = composer.engine.usage if composer.engine is not None else None
    if json_output:
        dumped = [plan.model_dump(mode="json") for plan in plans]
        print_json(dumped[0] if request is not None
                   else {"plans": dumped, "usage": usage.to_dict() if usage is not None else None})
        return
    for plan in plans:
        console.print(plan_tree(plan), soft_wrap=False)  # soft-wrapped, a tree is cut: wrap it
        console.print(_footer(plan), highlight=False)
        if trace:
            console.print(trace_tree(plan), soft_wrap=False)  # soft-wrapped, a tree is cut: wrap it
    if usage is not None and usage.total().calls:
        console.print(usage.table("Model calls by call type"))


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" + ("" if number == 1 else "s")


def _candidate_text(candidate: Any) -> str:
    return f"{shown_inline(candidate.name)} [dim]{shown_inline(candidate.id)}[/dim] {candidate.score:.2f}"


def plan_tree(plan: Plan) -> RichTree:
    """Steps by parallel group: each with its task, the service chosen, its alternatives and what it waits for."""
    steps = {step.id: step for step in plan.steps}
    title = (f"[bold]{shown_inline(plan.request)}[/bold]\n[dim]decomposed by {shown_inline(plan.decomposer)}; "
             f"steps searched with {shown_inline(plan.method)}; {_count(len(plan.steps), 'step')} in "
             f"{_count(len(plan.groups), 'group')}[/dim]")
    root = RichTree(title)
    for number, group in enumerate(plan.groups, start=1):
        parallel = " (run together)" if len(group) > 1 else ""
        branch = root.add(f"[cyan]group {number}{parallel}[/cyan]")
        for step_id in group:
            step = steps[step_id]
            after = f"  [dim]after {', '.join(step.depends_on)}[/dim]" if step.depends_on else ""
            if step.inputs_from:
                after += f"  [dim]takes the output of {', '.join(step.inputs_from)}[/dim]"
            node = branch.add(f"[bold]{step.id}[/bold] {shown_inline(step.task)}{after}")
            if step.choice is None:
                node.add(f"[red]no service found[/red]{': ' + shown_inline(step.error) if step.error else ''}")
                continue
            sure = "" if step.confidence is None else f" [dim](confidence {step.confidence:.2f})[/dim]"
            named = " [dim](named in the step)[/dim]" if step.choice.named else ""
            node.add(f"[green]→ {_candidate_text(step.choice)}[/green]{named}{sure}")
            if step.low_confidence:
                runner_up = (f"; runner-up: {_candidate_text(step.alternatives[0])}" if step.alternatives else "")
                node.add(f"[yellow]⚠ low confidence: this service may not do what the step asks{runner_up}; "
                         "ask the user[/yellow]")
            if step.alternatives:
                node.add("[dim]alternatives:[/dim] " + ", ".join(_candidate_text(c) for c in step.alternatives))
    return root


def _footer(plan: Plan) -> str:
    edges = ", ".join(f"{e.source}→{e.target}" + (f" ({', '.join(e.fields)})" if e.fields else "")
                      for e in plan.edges) or "none"
    lines = [f"services: {', '.join(shown_inline(s) for s in plan.services) or 'none'}; dependencies: {edges}",
             f"[dim]{plan.seconds * 1000:.0f} ms, {plan.calls} model calls, "
             f"{plan.prompt_tokens + plan.completion_tokens:,} tokens[/dim]"]
    lines += [f"[yellow]note:[/yellow] {shown_inline(note)}" for note in plan.notes]
    if plan.error:
        lines.append(f"[red]error:[/red] {shown_inline(plan.error)}")
    return "\n".join(lines)


def trace_tree(plan: Plan) -> RichTree:
    """How every candidate scored (similarity, compatibility and its signals), and each SAD round."""
    root = RichTree("[bold]trace[/bold]")
    for step in plan.steps:
        node = root.add(f"{step.id} searched [italic]{shown_inline(step.query)}[/italic]")
        for candidate in ([step.choice] if step.choice else []) + step.alternatives:
            compat = "-" if candidate.compatibility is None else f"{candidate.compatibility:.2f}"
            signals = ", ".join(f"{name} {value:.2f}" for name, value in candidate.signals.items())
            standing = "" if candidate.z is None else f" (z {candidate.z:.1f})"
            node.add(f"#{candidate.rank} {shown_inline(candidate.name)}: similarity {candidate.similarity:.2f}"
                     f"{standing}, compatibility {compat}{' (' + signals + ')' if signals else ''} → "
                     f"{candidate.score:.2f}")
    sad = plan.sad
    branch = root.add(f"SAD: {'applied' if sad.applied else 'not applied'}"
                      + (f" ({shown_inline(sad.reason)})" if sad.reason else "")
                      + (f"; {sad.copy_rejected} refused as copies" if sad.copy_rejected else ""))
    if sad.first_steps:
        branch.add("first: " + " | ".join(shown_inline(s.task) for s in sad.first_steps))
    for sad_round in sad.rounds:
        state = "kept" if sad_round.kept else "refused"
        overlap = f", hint overlap {sad_round.jaccard:.2f}" if sad_round.jaccard is not None else ""
        node = branch.add(f"round {sad_round.round}: {state}{overlap}"
                          + (f" ({shown_inline(sad_round.reason)})" if sad_round.reason else ""))
        node.add("hints: " + ", ".join(shown_inline(name) for name in sad_round.hints))
        if sad_round.steps:
            node.add("steps: " + " | ".join(shown_inline(s.task) for s in sad_round.steps))
    return root
