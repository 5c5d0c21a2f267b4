"""The Typer application and the registration of every command group."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from a2x_local import provenance
from a2x_local.llm import send_startup_output_to
from a2x_local.settings import home_dir

ENGINE_LOG = "logs/engine.log"

app = typer.Typer(
    name="a2x-local",
    help="Local-first, offline service discovery for AI agents.\n\n"
    "Example: a2x-local ingest data/sample && a2x-local stats && a2x-local search 'convert currencies'",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)


def _version(value: bool) -> None:
    if value:
        typer.echo(provenance.current().describe())
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    db: Annotated[Path | None, typer.Option("--db", help="Registry database for every sub-command.")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show engine start-up output (vLLM, torch) "
                                          f"here instead of in $A2X_HOME/{ENGINE_LOG}.")] = False,
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and where it came from (commit, "
                                          "offline bundle), and exit.")] = False,
) -> None:
    ctx.obj = {"db": db, "verbose": verbose}
    send_startup_output_to(None if verbose else home_dir() / ENGINE_LOG)


def _register() -> None:
    # Each module adds its commands to `app`; importing them here keeps the order of `--help` stable.
    from a2x_local.cli import registry_cmds  # noqa: F401
    # isort: split
    from a2x_local.cli import eval_cmds, index_cmds, search_cmds  # noqa: F401  (registers index, search, eval)
    # isort: split
    from a2x_local.cli import compose_cmds  # noqa: F401  (registers compose)
    # isort: split
    from a2x_local.cli import models_cmds  # noqa: F401  (registers models list|check)
    # isort: split
    from a2x_local.cli import delivery_cmds  # noqa: F401  (registers bundle, models pack|verify)
    # isort: split
    from a2x_local.cli import build_cmds, tree_cmds  # noqa: F401  (registers build, tree ...)
    # isort: split
    from a2x_local.cli import (
        lifecycle_cmds,  # noqa: F401  (registers tree update|diff, nightly)
        serve_cmds,  # noqa: F401  (registers serve)
    )


_register()
