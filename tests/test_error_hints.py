"""Every failure says what to do (docs/configuration.md: "one `error:` line and a `hint:`"): the sources raise no
a2x-local error without a hint, and a table of failing commands shows one each."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from tests.support.paths import ROOT

PACKAGE_DIR = ROOT / "a2x_local"
ROOT_ERROR = "A2XError"
WAIVER = "# no hint:"   # on a call's lines, with the reason, for an error that cannot carry one


def _sources() -> dict[Path, ast.Module]:
    return {path: ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for path in sorted(PACKAGE_DIR.rglob("*.py"))}


SOURCES = _sources()


def _name(node: ast.expr) -> str:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""


def error_classes() -> tuple[set[str], set[str]]:
    """(every error class derived from A2XError, those whose __init__ writes the hint itself)."""
    bases: dict[str, set[str]] = {}
    own_hint: set[str] = set()
    for tree in SOURCES.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases[node.name] = {_name(base) for base in node.bases}
                init = next((item for item in node.body if isinstance(item, ast.FunctionDef)
                             and item.name == "__init__"), None)
                if init is not None and "hint" not in {arg.arg for arg in init.args.args + init.args.kwonlyargs}:
                    supers = [call for call in ast.walk(init) if isinstance(call, ast.Call)
                              and _name(call.func) == "__init__"]
                    if any(_gives_hint(call) for call in supers):
                        own_hint.add(node.name)
    errors = {ROOT_ERROR}
    while grown := {name for name, parents in bases.items() if parents & errors} - errors:
        errors |= grown
    return errors, own_hint


def _gives_hint(call: ast.Call) -> bool:
    hint = next((keyword.value for keyword in call.keywords if keyword.arg == "hint"), None)
    return hint is not None and not (isinstance(hint, ast.Constant) and hint.value in (None, ""))


def calls_without_hint() -> list[str]:
    errors, own_hint = error_classes()
    found = []
    for path, tree in SOURCES.items():
        lines = path.read_text(encoding="utf-8").splitlines()
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and _name(node.func) in errors - own_hint):
                continue
            if _gives_hint(node) or any(keyword.arg is None for keyword in node.keywords):
                continue
            if any(WAIVER in line for line in lines[node.lineno - 1: node.end_lineno]):
                continue
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)[:100]}")
    return found


def test_the_error_classes_are_found():
    errors, own_hint = error_classes()
    assert {"UserError", "InputError", "InternalError", "ConflictError", "BadRequest"} <= errors
    assert {"ConflictError", "SyncRefusedError"} <= own_hint and "InputError" not in own_hint


def test_every_error_the_package_raises_carries_a_hint():
    missing = calls_without_hint()
    assert not missing, (f"errors raised without hint= (add one that says what to do, or `{WAIVER} reason`):\n"
                         + "\n".join(missing))


# --- failing commands, as a user meets them --------------------------------------------------------------------------

def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def cases(tmp: Path) -> dict[str, tuple[str, ...]]:
    """Label -> the arguments of a command that fails with a user error (the database is the ten-service one)."""
    entry = {"id": "x1", "name": "X"}   # no description
    tree = {"format": "a2x-tree", "version": 1, "root": {"name": "All", "description": "All.", "children": [
        {"name": "One", "description": "One.", "services": ["no-such-service"]}]}}
    return {
        "ingest malformed JSON": ("ingest", _write(tmp / "bad.json", "[{\"id\": 1,")),
        "ingest an entry without description": ("ingest", _write(tmp / "entry.json", json.dumps([entry]))),
        "ingest a missing path": ("ingest", tmp / "nothing-here.json"),
        "ingest a CSV without columns": ("ingest", _write(tmp / "s.csv", "id,title\n1,x\n")),
        "ingest a SKILL.md without front matter": ("ingest", "-f", "skill",
                                                   _write(tmp / "skills" / "a" / "SKILL.md", "# A skill\n")),
        "ingest a duplicate id": ("ingest", _write(tmp / "dup.jsonl", '{"id": "d", "name": "D", "description": "d"}\n'
                                                   '{"id": "d", "name": "D", "description": "d"}\n')),
        "ingest an unknown format": ("ingest", "-f", "yaml", tmp / "bad.json"),
        "services remove an unknown id": ("services", "remove", "no-such-id"),
        "services show an unknown id": ("services", "show", "no-such-id"),
        "tree show without a tree": ("tree", "show"),
        "tree activate an unknown tree": ("tree", "activate", "42"),
        "tree delete an unknown tree": ("tree", "delete", "42"),
        "tree import a missing file": ("tree", "import", tmp / "no-tree.json"),
        "tree import malformed JSON": ("tree", "import", _write(tmp / "tree-bad.json", "{")),
        "tree import unknown services": ("tree", "import", _write(tmp / "tree.json", json.dumps(tree))),
        "search an empty query file": ("search", "--queries", _write(tmp / "q.txt", "\n"), "-m", "bm25"),
        "search a bad option": ("search", "weather", "-m", "bm25", "-o", "rrf_k"),
        "search an unknown method": ("search", "weather", "-m", "no-such-method"),
        "search -m a2x without a tree": ("search", "weather", "-m", "a2x"),
        "eval a query without text": ("eval", "-m", "bm25", "--no-plots", "--queries",
                                      _write(tmp / "qs.json", json.dumps([{"id": "q1", "correct_tools": ["a"]}]))),
        "eval compare a missing run": ("eval", "compare", tmp / "no-run"),
        "compose a bad steps file": ("compose", "book a trip", "--steps", _write(tmp / "steps.json", '{"steps": 3}')),
        "index an unknown embedding model": ("index", "--embedding-model", "no-such-model"),
        "a file that is not a registry": ("stats", "--db", _write(tmp / "not.duckdb", "not a database at all\n" * 500)),
    }


CASES = list(cases(Path("/unused")))


@pytest.mark.parametrize("label", CASES)
def test_a_failing_command_says_what_to_do(cli, registry_db, tmp_path, label: str):
    args = cases(tmp_path)[label]
    takes_db = "--db" not in args and args[:2] != ("eval", "compare")
    result = cli(*args, "--json", db=takes_db)
    assert result.code == 1, f"{label}: exit {result.code}\n{result.err}"
    lines = result.err.strip().splitlines()
    errors = [line for line in lines if line.startswith("error: ")]
    hints = [line for line in lines if line.startswith("hint: ")]
    assert len(errors) == 1 and len(hints) == 1, f"{label}:\n{result.err}"
    assert len(hints[0]) > len("hint: ") + 10, f"{label}: {hints[0]!r}"
    error = result.json()
    assert error["hint"] == hints[0].removeprefix("hint: ") and error["message"], error
