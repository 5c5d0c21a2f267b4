"""The `a2x-local` command: one tool, one sub-command per job."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

import typer
from rich.markup import escape

from a2x_local.cli.app import app
from a2x_local.cli.common import err_console, print_json
from a2x_local.errors import A2XError

__all__ = ["app", "main", "run"]


def run(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and return its exit code: 0 success, 1 user error, 2 usage error, 130 interrupted."""
    args = list(sys.argv[1:] if argv is None else argv)
    # Libraries that log to stdout (vLLM does by default) must not corrupt `--json` output.
    os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")
    command = typer.main.get_command(app)
    try:
        result = command.main(args=args, prog_name="a2x-local", standalone_mode=False)
    except typer.TyperException as exc:
        # Usage errors (unknown option, missing argument, bad value): typer's own formatting, exit code 2.
        from typer import rich_utils

        rich_utils.rich_format_error(exc)
        return 2
    except typer.Exit as exc:
        return exc.exit_code
    except typer.Abort:
        err_console.print("[red]aborted[/red]")
        return 130
    except KeyboardInterrupt:
        err_console.print("[red]interrupted[/red]")
        return 130
    except A2XError as exc:
        # soft_wrap: paths and ids in messages must stay whole for copy and paste (and for grep).
        err_console.print(f"[red]error:[/red] {escape(exc.message)}", highlight=False, soft_wrap=True)
        if exc.hint:
            err_console.print(f"[dim]hint:[/dim] {escape(exc.hint)}", highlight=False, soft_wrap=True)
        if "--json" in args:
            print_json(exc.to_dict())
        return exc.exit_code
    return result if isinstance(result, int) else 0


def main() -> None:
    """Console-script entry point."""
    sys.exit(run())
