"""The Typer application and the registration of every command group."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from a2x_local import __version__

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
        typer.echo(f"a2x-local {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    db: Annotated[Path | None, typer.Option("--db", help="Registry database for every sub-command.")] = None,
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    ctx.obj = {"db": db}


def _register() -> None:
    # Each module adds its commands to `app`; importing them here keeps the order of `--help` stable.
    from a2x_local.cli import registry_cmds  # noqa: F401
    # isort: split
    from a2x_local.cli import eval_cmds, index_cmds, search_cmds  # noqa: F401  (registers index, search, eval)
    # isort: split
    from a2x_local.cli import models_cmds  # noqa: F401  (registers models list|check)
    # isort: split
    from a2x_local.cli import build_cmds, tree_cmds  # noqa: F401  (registers build, tree ...)


_register()
