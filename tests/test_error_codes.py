"""Every error code a2x-local can send is documented (issue 21, finding 10: `HTTPError` and `UserError` were sent but
not documented), and every error cuts the long values it quotes."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import a2x_local
from a2x_local.errors import MAX_MESSAGE_CHARS, A2XError, InputError, UserError

ROOT = Path(__file__).resolve().parents[1]
ABSTRACT = {"A2XError", "ServeError"}
# Modules not imported to find the error classes: the engines (their libraries), the CLI and the test doubles
# (which declare none).
NOT_IMPORTED = ("a2x_local.cli", "a2x_local.testing")


def _error_classes() -> dict[str, type[A2XError]]:
    """Every error class of the package: each module that may declare one is imported first."""
    for module in pkgutil.walk_packages(a2x_local.__path__, "a2x_local."):
        if not module.name.startswith(NOT_IMPORTED) and not module.name.endswith(("_engine", "guidance_processor")):
            importlib.import_module(module.name)
    found, todo = {}, [A2XError]
    while todo:
        for sub in todo.pop().__subclasses__():
            found[sub.__name__] = sub
            todo.append(sub)
    return found


def _sets_its_code(cls: type[A2XError]) -> bool:
    """Whether the __init__ the class runs (its own or the nearest inherited one) sets the code."""
    for klass in cls.__mro__:
        if "__init__" in klass.__dict__:
            return klass is not A2XError and "code=" in inspect.getsource(klass.__dict__["__init__"])
    return False


def codes_sent() -> set[str]:
    """Every `code="..."` in the package, every HTTP code of the API's table and fallback, and the class name of every
    error raised without a code (its code then)."""
    classes = _error_classes()
    codes: set[str] = set()
    for path in (ROOT / "a2x_local").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.keyword) and node.arg == "code" and isinstance(node.value, ast.Constant):
                codes.add(node.value.value)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in classes:
                cls = classes[node.func.id]
                if not any(k.arg == "code" for k in node.keywords) and not _sets_its_code(cls):
                    codes.add(cls.__name__)
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("_error", "_refuse"):
                literal = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
                codes.update(value for value in literal[:1] if re.fullmatch(r"[A-Z][A-Za-z]+", value))
    from a2x_local.serve.http_api import _HTTP_CODES

    codes.update(_HTTP_CODES.values())
    codes.add("HTTPError")
    return codes - ABSTRACT - {""}


def documented() -> set[str]:
    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    table = text.split("## Error codes", 1)[1]
    return set(re.findall(r"`([A-Z][A-Za-z]+)`", table))


def test_every_code_sent_is_documented():
    sent = codes_sent()
    assert {"UserError", "HTTPError", "InputError", "BadText", "RegistryBusy", "EmptyQuery"} <= sent
    assert sorted(sent - documented()) == []


def test_errors_cut_the_long_values_they_quote():
    error = InputError("tree.json", "'name' is longer than 300 characters", entry="root > " + "A" * 5_000_000,
                       field="name")
    assert len(error.message) < 600 and "(4,999,807 more characters)" in error.message
    long = UserError("x" * 10_000, hint="y" * 10_000)
    assert len(long.message) < MAX_MESSAGE_CHARS + 50 and len(long.hint) < MAX_MESSAGE_CHARS + 50


def test_a_tree_import_error_does_not_repeat_a_huge_name(cli, registry_db, tmp_path):
    import json

    name = "A" * 5_000_000
    tree = {"format": "a2x-tree", "version": 1, "root": {"name": "All", "description": "x", "children": [
        {"name": name, "description": "d", "services": ["weather"]}]}}
    path = tmp_path / "tree.json"
    path.write_text(json.dumps(tree), encoding="utf-8")
    result = cli("tree", "import", path)
    assert result.code == 1 and "is longer than" in result.err
    assert len(result.err) < 3000
