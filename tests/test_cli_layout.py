"""The command line's own layout: no import circle inside `a2x_local/cli/`, one composition root (cli/app.py) that
lists every command module and that no command module imports, and every command group's sub-commands in one module.

The import graph is read from the sources with `ast` (imports inside functions included), as
tests/test_architecture.py reads the stages'.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import typer

import a2x_local.cli

CLI_DIR = Path(a2x_local.cli.__file__).resolve().parent
PACKAGE = "a2x_local.cli"
app_module = importlib.import_module(f"{PACKAGE}.app")    # the module (the package's `app` is the application)
COMMAND_MODULES = app_module.COMMAND_MODULES


def cli_import_graph(folder: Path = CLI_DIR) -> dict[str, set[str]]:
    """Module -> the modules of the CLI package it imports (`from a2x_local.cli import x` names the submodule x
    when there is one, else the package itself)."""
    modules = {path.stem: path for path in folder.glob("*.py")}
    name_of = {stem: PACKAGE if stem == "__init__" else f"{PACKAGE}.{stem}" for stem in modules}
    graph: dict[str, set[str]] = {name: set() for name in name_of.values()}
    for stem, path in modules.items():
        importer = name_of[stem]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                if node.module == PACKAGE:
                    targets = [f"{PACKAGE}.{alias.name}" if alias.name in modules else PACKAGE for alias in node.names]
                else:
                    targets = [node.module]
            graph[importer] |= {target for target in targets if target in graph and target != importer}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of ``graph`` as a path that ends where it starts, or None."""
    state: dict[str, str] = {}   # "open" while on the path, "done" once every module below it is checked
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = "open"
        path.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == "open":
                return [*path[path.index(target):], target]
            if target not in state and (cycle := visit(target)):
                return cycle
        path.pop()
        state[module] = "done"
        return None

    for module in sorted(graph):
        if module not in state and (cycle := visit(module)):
            return cycle
    return None


def test_the_cycle_finder_finds_a_circle_and_its_absence():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_the_cli_package_has_no_import_circle():
    graph = cli_import_graph()
    cycle = find_cycle(graph)
    assert cycle is None, "import circle in a2x_local/cli: " + " -> ".join(cycle or [])


def test_the_composition_root_lists_every_command_module_and_none_imports_it():
    command_modules = sorted(path.stem for path in CLI_DIR.glob("*_cmds.py"))
    assert sorted(COMMAND_MODULES) == command_modules and len(set(COMMAND_MODULES)) == len(COMMAND_MODULES)
    importers = sorted(name for name, targets in cli_import_graph().items() if f"{PACKAGE}.app" in targets)
    assert importers == [PACKAGE], f"only the package imports the composition root, not {importers}"


def test_help_lists_the_commands_in_the_order_of_the_composition_root():
    """The order is the list's, not the order the modules were imported in: an application built from the list
    reversed (every module already imported) lists the commands reversed."""
    before = list(typer.main.get_command(a2x_local.cli.app).commands)
    modules = {name: importlib.import_module(f"{PACKAGE}.{name}") for name in COMMAND_MODULES}
    first = [info.name for info in modules[COMMAND_MODULES[0]].commands.registered_commands]
    assert before[:len(first)] == first
    try:
        app_module.COMMAND_MODULES = tuple(reversed(COMMAND_MODULES))
        reversed_order = list(typer.main.get_command(app_module.build_app()).commands)
    finally:
        app_module.COMMAND_MODULES = COMMAND_MODULES
    last = [info.name for info in modules[COMMAND_MODULES[-1]].commands.registered_commands]
    assert reversed_order[:len(last)] == last and sorted(reversed_order) == sorted(before)


def test_each_command_group_lives_in_one_module():
    root = typer.main.get_command(a2x_local.cli.app)
    groups = {name: command for name, command in root.commands.items() if hasattr(command, "commands")}
    assert {"tree", "services", "models", "eval"} <= set(groups)
    for name, group in groups.items():
        modules = {sub.callback.__module__ for sub in group.commands.values()}
        assert len(modules) == 1, f"`{name}` sub-commands are spread over {sorted(modules)}"
