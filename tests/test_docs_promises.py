"""What the manual shows works as shown: every Python import in its examples, the commands' help texts and the
summaries of docs/cli.md's contents."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest
import typer

import a2x_local.cli
from tests.support.paths import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
ROOT_COMMAND = typer.main.get_command(a2x_local.cli.app)


def python_blocks(page: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.S)


def documented_imports() -> list[tuple[str, str, str]]:
    """(page, module, name) of every `from a2x_local... import name` in the pages' Python examples."""
    found = []
    for page in PAGES:
        for block in python_blocks(page):
            for node in ast.walk(ast.parse(block)):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("a2x_local"):
                    found += [(page.name, node.module, alias.name) for alias in node.names]
    return found


IMPORTS = documented_imports()


def test_the_docs_show_imports():
    assert ("search.md", "a2x_local.search", "make_retriever") in IMPORTS
    assert len(IMPORTS) >= 5


@pytest.mark.parametrize(("page", "module", "name"), IMPORTS, ids=[f"{p}:{m}.{n}" for p, m, n in IMPORTS])
def test_every_import_the_docs_show_works(page: str, module: str, name: str):
    assert hasattr(importlib.import_module(module), name), f"{page}: `from {module} import {name}` fails"


# --- help texts: what the terminal shows is what was written --------------------------------------------------------

STYLES = re.compile(r"\[/?(bold|dim|italic|red|green|yellow|cyan)\]")


def help_texts(command=ROOT_COMMAND, path: str = "a2x-local"):
    """(where, text) of every command's help and every parameter's help, the whole CLI."""
    yield path, command.help or ""
    for param in command.params:
        yield f"{path} {param.name}", getattr(param, "help", None) or ""
    for name, sub in getattr(command, "commands", {}).items():
        yield from help_texts(sub, f"{path} {name}")


HELP_TEXTS = list(help_texts())


def test_help_texts_are_found():
    assert len(HELP_TEXTS) > 100 and any("embedding_model" in where for where, _ in HELP_TEXTS)


@pytest.mark.parametrize(("where", "text"), [item for item in HELP_TEXTS if "[" in item[1]],
                         ids=[where for where, text in HELP_TEXTS if "[" in text])
def test_no_bracketed_text_vanishes_as_markup(where: str, text: str):
    """Rich reads `[word]` as a style tag and drops it: `[retrieval.embedding_models]` must be written `\\[...]`."""
    from rich.text import Text

    shown = Text.from_markup(text).plain
    assert shown == STYLES.sub("", text).replace("\\[", "["), f"{where}: the help loses text: {shown!r}"


def test_the_index_help_names_the_alias_table(cli):
    result = cli("index", "--help", db=False)
    assert result.code == 0
    flat = " ".join(result.out.replace("│", " ").split())
    assert "or one of [retrieval.embedding_models]" in flat, flat


# --- docs/cli.md: its contents give each command's whole first sentence ---------------------------------------------

def test_the_contents_of_the_command_reference_cut_no_summary():
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    entries = re.findall(r"^\s*- \[(a2x-local [^\]]+)\]\(#[^)]+\): (.+)$", text, flags=re.M)
    assert len(entries) >= 20
    commands = {path: command for path, command in walk()}
    for path, summary in entries:
        first = (commands[path].help or "").split("\n\n")[0]
        assert summary == " ".join(STYLES.sub("", first).replace("\\[", "[").split()), path
        assert summary.endswith("."), f"{path}: {summary!r} stops mid-sentence"


def walk(command=ROOT_COMMAND, path: str = "a2x-local"):
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():
        yield from walk(sub, f"{path} {name}")
