"""The `a2x-local` command: one tool, one sub-command per job.

`app.py` defines the application; each `*_cmds` module adds its commands to it, and this package imports them in
the order `--help` lists them. `output.py` is what commands show, `options.py` the flags they share.
"""

from __future__ import annotations

import errno
import os
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

import typer

from a2x_local.cli.app import app
from a2x_local.cli.output import err_console, print_error, print_json, terminal_safe
from a2x_local.db import translate
from a2x_local.errors import A2XError, InternalError, Interrupted, UserError

# isort: split
# The command modules register their commands on import; the order here is the order of `--help`.
from a2x_local.cli import registry_cmds  # noqa: F401  (ingest, stats, services ...)

# isort: split
from a2x_local.cli import eval_cmds, index_cmds, search_cmds  # noqa: F401  (eval ..., index, search)

# isort: split
from a2x_local.cli import compose_cmds  # noqa: F401  (compose)

# isort: split
from a2x_local.cli import models_cmds  # noqa: F401  (models list|check|make-tiny)

# isort: split
from a2x_local.cli import bundle_cmds  # noqa: F401  (bundle)

# isort: split
from a2x_local.cli import build_cmds, tree_cmds  # noqa: F401  (build, tree ...)

# isort: split
from a2x_local.cli import nightly_cmds, serve_cmds  # noqa: F401  (nightly, serve)

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
        # Usage errors (unknown option, missing argument, bad value): typer's own formatting, exit code 2.
        from typer import rich_utils

        rich_utils.rich_format_error(exc)
        return 2
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
