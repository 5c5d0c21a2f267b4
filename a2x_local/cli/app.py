"""The composition root: `build_app` registers what the stages above search and the plug-ins add (compose's method,
entry-point engines and methods: `a2x_local.components.register_components`), then builds the Typer application
(its name, help and global options) from the command modules of `COMMAND_MODULES`, in that order: the order of
`--help`. Importing a command module registers nothing; each holds its commands in its own `commands` Typer, and
only this module assembles them."""

from __future__ import annotations

import importlib
import inspect
import logging
from pathlib import Path
from typing import Annotated

import typer

from a2x_local import provenance
from a2x_local.llm import send_startup_output_to
from a2x_local.settings import db_option, home_dir

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

# The command modules of `a2x_local.cli`, in the order `--help` lists their commands (then their groups).
COMMAND_MODULES: tuple[str, ...] = (
    "registry_cmds",    # ingest, stats, services ...
    "eval_cmds",        # eval ...
    "index_cmds",       # index
    "search_cmds",      # search
    "compose_cmds",     # compose
    "models_cmds",      # models list|check|import|make-tiny|pack|verify
    "bundle_cmds",      # bundle
    "build_cmds",       # build
    "tree_cmds",        # tree ...
    "nightly_cmds",     # nightly
    "serve_cmds",       # serve
    "gateway_cmds",     # gateway show|check, audit
)


def _version(value: bool) -> None:
    if value:
        typer.echo(provenance.current().describe())
        raise typer.Exit()


def _root(
    ctx: typer.Context,
    db: Annotated[Path | None, typer.Option("--db", help="Registry database for every sub-command.",
                                            parser=db_option, metavar="PATH")] = None,
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


def build_app() -> typer.Typer:
    """The `a2x-local` application: registrations first (`register_components`: the stages' tables, compose's
    method, the plug-ins), then the commands of `COMMAND_MODULES`. The command modules are imported here, after the
    registrations, because `--method`'s help lists the methods there are."""
    from a2x_local.components import register_components

    register_components()
    app = typer.Typer(
        name="a2x-local",
        help="Local-first, offline service discovery for AI agents.\n\n"
        "Example: a2x-local ingest data/sample && a2x-local stats && a2x-local search 'convert currencies'",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode="rich",
    )
    app.callback()(_root)
    for name in COMMAND_MODULES:
        commands = importlib.import_module(f"a2x_local.cli.{name}").commands
        app.registered_commands.extend(commands.registered_commands)
        app.registered_groups.extend(commands.registered_groups)
    _one_line_summaries(app)
    return app


def _one_line_summaries(app: typer.Typer) -> None:
    """A command's summary in its group's help is the first paragraph of its help, on one line: with rich markup,
    typer keeps that paragraph's line breaks there, so a summary broke wherever its source line did ("when
    anything" / "changed" in `a2x-local --help`), at any width."""
    for info in app.registered_commands:
        if info.short_help is None:
            text = info.help if isinstance(info.help, str) else inspect.getdoc(info.callback) or ""
            info.short_help = " ".join(inspect.cleandoc(text).split("\n\n")[0].split()) or None
    for group in app.registered_groups:
        if group.typer_instance is not None:
            _one_line_summaries(group.typer_instance)
