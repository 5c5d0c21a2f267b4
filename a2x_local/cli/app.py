"""The Typer application: its name, help and global options. The command modules add their commands to it (the
package `a2x_local.cli` imports them), so this module imports none of them."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated

import typer

from a2x_local import provenance
from a2x_local.llm import send_startup_output_to
from a2x_local.settings import home_dir

ENGINE_LOG = "logs/engine.log"
# Libraries that turn on their own debug logging when imported (bm25s sets DEBUG on its logger): a server's stderr
# then carried a line per index built, through the handler the MCP SDK puts on the root logger.
CHATTY_LIBRARIES = ("bm25s",)


def _below_warning(record: logging.LogRecord) -> bool:
    return record.levelno >= logging.WARNING


def quiet_libraries(verbose: bool) -> None:
    """Keep the libraries' debug and info lines off stderr unless --verbose. A filter, not a level: bm25s sets its
    logger's level when it is imported, after this runs; a filter stays."""
    for name in CHATTY_LIBRARIES:
        logger = logging.getLogger(name)
        if verbose:
            logger.removeFilter(_below_warning)
        elif _below_warning not in logger.filters:
            logger.addFilter(_below_warning)

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
                                          f"here instead of in $A2X_HOME/{ENGINE_LOG}, and libraries' debug "
                                          "lines.")] = False,
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and where it came from (commit, "
                                          "offline bundle), and exit.")] = False,
) -> None:
    ctx.obj = {"db": db, "verbose": verbose}
    send_startup_output_to(None if verbose else home_dir() / ENGINE_LOG)
    quiet_libraries(verbose)



def _register_higher_methods() -> None:
    """The composition root: the search stage knows only its own methods, and the stages above it add theirs here,
    before any command module builds its `--method` help from the list."""
    from a2x_local.compose import COMPOSE_SPEC
    from a2x_local.search import register_method

    register_method(COMPOSE_SPEC, replace=True)


_register_higher_methods()
