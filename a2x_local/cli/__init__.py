"""The `a2x-local` command: one tool, one sub-command per job.

`app.py` is the composition root: it registers the methods and engines that other stages and plug-ins add
(`a2x_local.components`), and builds the application from its list of `*_cmds` modules, each holding its own
commands.
`output.py` is what commands show, `options.py` the flags they share.
"""

from __future__ import annotations

import errno
import os
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

import typer

from a2x_local.cli.app import build_app
from a2x_local.cli.output import err_console, print_error, print_json, terminal_safe
from a2x_local.db import translate
from a2x_local.errors import A2XError, InternalError, Interrupted, UsageError, UserError

# Built once, by the composition root (cli/app.py): its registrations, then its list of command modules.
app = build_app()

__all__ = ["app", "main", "run"]

# Typer turns Ctrl-C into a silent `Exit(130)`; no command exits 130 on purpose, so that code means "interrupted".
_INTERRUPTED = 130
DEBUG_VARIABLE = "A2X_DEBUG"


def run(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and return its exit code: 0 success, 1 user error, 2 usage error, 3 internal error (a bug),
    130 interrupted. Every failure is one `error:` line and a `hint:` (a JSON error too under `--json`)."""
    args = list(sys.argv[1:] if argv is None else argv)
    # Libraries that log to stdout (vLLM does by default) must not corrupt `--json` output.
    os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")
    try:
        command = typer.main.get_command(app)
        result = command.main(args=args, prog_name="a2x-local", standalone_mode=False)
    except typer.TyperException as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":
            # A group called without a sub-command: its help, as `--help` prints it (exit code 2, as click has it).
            from typer import rich_utils

            rich_utils.rich_format_error(exc)
            return 2
        # Usage errors (unknown option, missing argument, bad value) fail like every other error: one `error:`
        # line and a `hint:` (the usage and where help is), not a boxed panel; the JSON error too under --json.
        return _report(_usage_error(exc), args)
    except typer.Exit as exc:
        return _report(_interrupted(), args) if exc.exit_code == _INTERRUPTED else exc.exit_code
    except (typer.Abort, KeyboardInterrupt):
        return _report(_interrupted(), args)
    except A2XError as exc:
        return _report(exc, args)
    except Exception as exc:  # the last line of defence: a traceback is never what a user sees
        return _report(explain(exc), args, cause=exc)
    if result == _INTERRUPTED:
        return _report(_interrupted(), args)
    return result if isinstance(result, int) else 0


def _usage_error(exc: typer.TyperException) -> A2XError:
    """A click error (typer vendors click: its classes are not public, so they are told apart by their exit code)
    as ours: a usage error (exit code 2) with the command's usage and its --help in the hint; another (a file click
    could not open) a user error (exit code 1)."""
    message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
    if getattr(exc, "exit_code", 2) != 2:
        return UserError(message, hint="check the path and its permissions", code="UserError")
    ctx = getattr(exc, "ctx", None)
    if ctx is None:
        return UsageError(message, hint="`a2x-local --help` lists the commands", code="UsageError")
    usage = ctx.get_usage().removeprefix("Usage: ").strip()
    return UsageError(message, code="UsageError",
                      hint=f"usage: {usage}; `{ctx.command_path} --help` explains each option")


def _interrupted() -> Interrupted:
    return Interrupted("interrupted (Ctrl-C)", hint="what finished before is kept: ingests and index builds are all or"
                       " nothing, and an interrupted build continues with `a2x-local build --resume`")


def explain(exc: BaseException) -> A2XError:
    """The one-line error for an exception no command turned into a user error."""
    if isinstance(exc, MemoryError):
        return UserError("out of memory", hint="close other programs, or work on smaller inputs (split the input,"
                         " lower batch sizes)", code="OutOfMemory")
    if isinstance(exc, RecursionError):
        return UserError("the input is nested too deeply to process", hint="flatten the input", code="TooDeep")
    database = translate(exc, Path(getattr(exc, "filename", None) or "the registry database"))
    if database is not None:
        return database
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        text = exc.strerror or errno.errorcode.get(exc.errno or 0, "") or str(exc)
        return UserError(f"{where}{text}", hint="check the path, its permissions and the free disk space",
                         code="OSError")
    return InternalError(f"unexpected {type(exc).__name__}: {str(exc)[:500]}",
                         hint=f"this is a bug in a2x-local; rerun with {DEBUG_VARIABLE}=1 to see the traceback, and"
                         " report it")


def _report(exc: A2XError, args: Sequence[str], *, cause: BaseException | None = None) -> int:
    shown = cause or exc
    if os.environ.get(DEBUG_VARIABLE) and shown.__traceback__ is not None:
        err_console.print(terminal_safe("".join(traceback.format_exception(shown))), markup=False, highlight=False)
    print_error(exc)
    if "--json" in args:
        print_json(exc.to_dict())
    return exc.exit_code


def main() -> None:
    """Console-script entry point."""
    sys.exit(run())
