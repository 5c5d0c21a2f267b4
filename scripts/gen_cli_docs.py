"""Write docs/cli.md, the command reference, from the CLI itself.

Every command and sub-command gets a section: its usage line, its help text, its arguments and its options (names,
value, default, help), grouped by help panel as `--help` groups them. The page is built from the parameter objects
typer hands to click, never from rendered terminal help, so it does not depend on the terminal width and holds no
colour codes; the same sources always give the same bytes.

    .venv/bin/python scripts/gen_cli_docs.py          # rewrite docs/cli.md
    .venv/bin/python scripts/gen_cli_docs.py --check  # exit 1 when docs/cli.md is stale (tests/test_cli_docs.py)
"""

from __future__ import annotations

import argparse
import inspect
import re
import sys
from collections.abc import Iterator
from enum import Enum
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import typer  # noqa: E402
from rich.text import Text  # noqa: E402

from a2x_local.cli import app  # noqa: E402

PROGRAM = "a2x-local"
DOCS_FILE = ROOT / "docs" / "cli.md"
REGENERATE = ".venv/bin/python scripts/gen_cli_docs.py"
OPTIONS_PANEL = "Options"


def walk(command: Any, ctx: Any) -> Iterator[tuple[Any, Any]]:
    """(context, command) for a command and every visible command below it, in `--help` order."""
    yield ctx, command
    if hasattr(command, "commands"):
        for name in command.list_commands(ctx):
            sub = command.commands[name]
            if not sub.hidden:
                yield from walk(sub, sub.context_class(sub, info_name=name, parent=ctx))


def plain(text: str | None) -> str:
    """Help text as `--help` shows it: Rich markup resolved (`[bold]x[/bold]` -> x, `\\[engine]` -> [engine])."""
    return Text.from_markup(text or "", emoji=False).plain.strip()


def escape(text: str) -> str:
    """Markdown-safe prose: `*` and `<` outside code spans are literal (globs, `<queries>`), the rest stays as is."""
    parts = re.split(r"(`[^`]*`)", text)
    return "".join(part if index % 2 else re.sub(r"([*<])", r"\\\1", part) for index, part in enumerate(parts))


def help_paragraphs(command: Any) -> list[str]:
    """The command's help text as Markdown paragraphs; an `Example:` paragraph becomes a shell code block."""
    text = plain(inspect.cleandoc(command.help or "").partition("\f")[0])
    blocks = []
    for paragraph in (p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()):
        label, _, example = paragraph.partition(":")
        if label in ("Example", "Examples") and example.strip():
            blocks.append(f"{label}:\n\n```sh\n{example.strip()}\n```")
        else:
            blocks.append(escape(paragraph))
    return blocks


def argument_name(argument: Any) -> str:
    name = argument.metavar or argument.name.upper()
    return name if argument.nargs == 1 or name.endswith("...") else f"{name}..."


def usage(ctx: Any, command: Any) -> str:
    pieces = [ctx.command_path, "[OPTIONS]"]
    for param in command.params:
        if param.param_type_name == "argument" and not param.hidden:
            name = argument_name(param)
            pieces.append(name if param.required else f"[{name}]")
    if hasattr(command, "commands"):
        pieces.append("COMMAND [ARGS]...")
    return " ".join(pieces)


def value_label(param: Any, ctx: Any) -> str:
    """What the parameter takes: its metavar, else its type (`int`, `path`, `vllm|transformers|openai`)."""
    if param.param_type_name == "option" and (param.is_flag or param.count):
        return ""
    if param.metavar is not None and param.param_type_name == "option":
        return param.metavar
    label = param.display_type(ctx).strip("<>")
    return label.removesuffix(" range")


def range_text(param: Any) -> str:
    low, high = getattr(param, "min", None), getattr(param, "max", None)
    if low is not None and high is not None:
        return f"{low} to {high}"
    if low is not None:
        return f"at least {low}"
    return f"at most {high}" if high is not None else ""


def default_text(param: Any) -> str:
    """The default `--help` would print, or "" when it prints none."""
    if isinstance(param.show_default, str):
        return param.show_default
    if not param.show_default or callable(param.default):
        return ""
    default = param.default
    if param.param_type_name == "option" and param.is_flag:
        if param.secondary_opts and default is not None:
            return param.opts[0] if default else param.secondary_opts[0]
        return param.opts[0] if default is True else ""
    if default is None or (isinstance(default, list | tuple) and not default):
        return ""
    if isinstance(default, list | tuple):
        return ", ".join(str(item.value if isinstance(item, Enum) else item) for item in default)
    return str(default.value if isinstance(default, Enum) else default)


def describe(param: Any, ctx: Any) -> str:
    """One list item: names and value in code, then the help text, default, range and requirement."""
    if param.param_type_name == "argument":
        names = f"`{argument_name(param)}`"
    else:
        names = " / ".join(", ".join(f"`{opt}`" for opt in opts) for opts in (param.opts, param.secondary_opts)
                           if opts)
    label = value_label(param, ctx)
    item = f"- {names}" + (f" `{label}`" if label else "")
    notes = []
    if description := escape(plain(param.help)):
        notes.append(description if description.endswith((".", "!", "?")) else f"{description}.")
    if default := default_text(param):
        notes.append(f"Default: `{default}`.")
    if limits := range_text(param):
        notes.append(f"Range: {limits}.")
    if param.required:
        notes.append("Required.")
    envvar = getattr(param, "envvar", None)
    if envvar:
        names = envvar if isinstance(envvar, list | tuple) else [envvar]
        notes.append("Environment: " + ", ".join(f"`{name}`" for name in names) + ".")
    return f"{item}: {' '.join(notes)}" if notes else item


def parameter_sections(ctx: Any, command: Any) -> list[str]:
    """Arguments first, then options by help panel (plain options first, then panels as they first appear)."""
    visible = [p for p in command.params if not p.hidden]
    arguments = [p for p in visible if p.param_type_name == "argument"]
    panels: dict[str, list[Any]] = {OPTIONS_PANEL: []}
    for param in visible:
        if param.param_type_name == "option":
            panels.setdefault(getattr(param, "rich_help_panel", None) or OPTIONS_PANEL, []).append(param)
    sections = []
    if arguments:
        sections.append("Arguments:\n\n" + "\n".join(describe(p, ctx) for p in arguments))
    for title, params in panels.items():
        if params:
            sections.append(f"{escape(plain(title))}:\n\n" + "\n".join(describe(p, ctx) for p in params))
    return sections


def anchor(title: str) -> str:
    """GitHub's heading anchor: lower case, spaces to dashes, punctuation other than - and _ dropped."""
    return re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")


def render() -> str:
    """The whole of docs/cli.md."""
    root = typer.main.get_command(app)
    entries = list(walk(root, root.context_class(root, info_name=PROGRAM)))
    lines = [
        "# Command reference",
        "",
        "Kind: reference · [all pages by kind](index.md)",
        "",
        f"_Generated by `scripts/gen_cli_docs.py` from the CLI's own help: do not edit this file by hand; after "
        f"changing a command, run `{REGENERATE}`._",
        "",
        "Every command also takes `--help`, which prints the same text in the terminal.",
        "",
    ]
    for ctx, command in entries[1:]:
        depth = ctx.command_path.count(" ") - 1
        first = help_paragraphs(command)[:1]
        # The whole first paragraph on one line (its first line alone would stop mid-sentence).
        summary = f": {' '.join(first[0].split())}" if first and not first[0].startswith("Example") else ""
        lines.append(f"{'  ' * depth}- [{ctx.command_path}](#{anchor(ctx.command_path)}){summary}")
    for ctx, command in entries:
        level = "#" * min(2 + max(ctx.command_path.count(" ") - 1, 0), 4)
        lines += ["", f"{level} {ctx.command_path}", "", f"Usage: `{usage(ctx, command)}`"]
        for block in [*help_paragraphs(command), *parameter_sections(ctx, command)]:
            lines += ["", block]
        if hasattr(command, "commands"):
            subs = [f"- [{sub_ctx.command_path}](#{anchor(sub_ctx.command_path)})"
                    for sub_ctx, _ in walk(command, ctx) if sub_ctx.parent is ctx]
            lines += ["", "Commands:", "", *subs]
    return "\n".join(line.rstrip() for line in lines).strip() + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the file differs from the generated text")
    parser.add_argument("--file", type=Path, default=DOCS_FILE, help=f"default: {DOCS_FILE.relative_to(ROOT)}")
    args = parser.parse_args(argv)
    text = render()
    current = args.file.read_text(encoding="utf-8") if args.file.is_file() else None
    if args.check:
        if current != text:
            print(f"{args.file} is out of date with the CLI; run {REGENERATE}", file=sys.stderr)
            return 1
        print(f"{args.file} is up to date")
        return 0
    if current != text:
        args.file.write_text(text, encoding="utf-8")
        print(f"wrote {args.file}")
    else:
        print(f"{args.file} already up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
