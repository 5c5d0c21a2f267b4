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
